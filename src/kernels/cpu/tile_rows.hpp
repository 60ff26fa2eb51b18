#pragma once
// Helpers of the AVX-512 and AMX kernels for rows of 16 32-bit lanes: a mask of a row's first lanes,
// and a 16 x 16 matrix transposed in registers (the AMX Linear's tile products hold y transposed, and
// the bf16 packers turn rows of pairs into columns).
#include "kernels/cpu/isa_target.hpp"

#include <cstdint>

#include <immintrin.h>

namespace cpdit::kernels::tile_rows {

// The first `remaining` of 16 lanes (none when remaining <= 0).
CPDIT_TARGET_AVX512 inline __mmask16 lanes(int64_t remaining) {
  return remaining >= 16 ? __mmask16(0xffff) : remaining <= 0 ? __mmask16(0) : __mmask16((1u << remaining) - 1);
}

// In place: r[i] element j becomes r[j] element i.
// GCC 12's unpack intrinsics start from _mm512_undefined_epi32(), which -W(maybe-)uninitialized
// mistakes for a read of an uninitialised value (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
CPDIT_TARGET_AVX512 inline void transpose16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {  // lane l of t[i]: a[i][4l], a[i+1][4l], a[i][4l+1], a[i+1][4l+1]
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // lane l of u[i + c]: column 4l + c, rows i .. i + 3
    u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int c = 0; c < 4; ++c) {  // gather lane l of the four row groups into output row 4l + c
    const __m512i low01 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44), low23 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44);
    const __m512i high01 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xee), high23 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xee);
    r[c] = _mm512_shuffle_i32x4(low01, low23, 0x88);
    r[4 + c] = _mm512_shuffle_i32x4(low01, low23, 0xdd);
    r[8 + c] = _mm512_shuffle_i32x4(high01, high23, 0x88);
    r[12 + c] = _mm512_shuffle_i32x4(high01, high23, 0xdd);
  }
}
#pragma GCC diagnostic pop

}  // namespace cpdit::kernels::tile_rows
