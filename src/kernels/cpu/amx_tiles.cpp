#include "kernels/cpu/amx_tiles.hpp"
#include "kernels/cpu/isa_target.hpp"

#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

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

// The CPU has the tile instructions and Linux lets this process use them (ARCH_REQ_XCOMP_PERM for
// XFEATURE_XTILEDATA; without it the first tile instruction faults).
bool tiles_permitted() {
  constexpr long kReqPermission = 0x1023, kTileData = 18;
  static const bool ok = __builtin_cpu_supports("amx-tile") && syscall(SYS_arch_prctl, kReqPermission, kTileData) == 0;
  return ok;
}

bool top_isa() { return kernel_isa() == Isa::avx512_bf16; }

}  // namespace

bool granted() {
  static const bool cpu = __builtin_cpu_supports("amx-bf16") && tiles_permitted();
  return cpu && top_isa();
}

CPDIT_TARGET_AMX void configure_tiles() {
  static constexpr TileConfig config = full_tiles();
  _tile_loadconfig(&config);
}

CPDIT_TARGET_AMX void release_tiles() { _tile_release(); }

}  // namespace cpdit::kernels::amx
