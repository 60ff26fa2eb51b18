#include "kernels/cpu/amx_tiles.hpp"

#if defined(__AMX_BF16__)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#endif

namespace cpdit::kernels::amx {

#if defined(__AMX_BF16__)
namespace {

// Palette 1, the LDTILECFG layout: eight tiles of 16 rows x 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t bytes_per_row[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

}  // namespace

bool granted() {
  constexpr long kReqPermission = 0x1023, kTileData = 18;  // ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA
  static const bool ok = syscall(SYS_arch_prctl, kReqPermission, kTileData) == 0;
  return ok;
}

void configure_tiles() {
  static const TileConfig config;
  _tile_loadconfig(&config);
}

void release_tiles() { _tile_release(); }
#else
bool granted() { return false; }
void configure_tiles() {}
void release_tiles() {}
#endif

}  // namespace cpdit::kernels::amx
