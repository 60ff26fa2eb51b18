#include "kernels/cpu/amx_tiles.hpp"
#include "kernels/cpu/isa_target.hpp"

#include <immintrin.h>

#include <cstdint>

namespace cpdit::kernels::amx {

namespace {

// Palette 1, the LDTILECFG layout: up to eight tiles of up to 16 rows x 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

constexpr TileConfig full_tiles() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) c.bytes_per_row[t] = 64, c.rows[t] = 16;
  return c;
}

}  // namespace

// The amx level is detected only where Linux granted the tile state (isa.cpp).
bool granted() { return kernel_isa() == Isa::amx; }

CPDIT_TARGET_AMX void configure_tiles() {
  static constexpr TileConfig config = full_tiles();
  _tile_loadconfig(&config);
}

CPDIT_TARGET_AMX void release_tiles() { _tile_release(); }

}  // namespace cpdit::kernels::amx
