#pragma once
// Q8_0 and Q4_0 blocks for the kernels that compute on them (linear_int8.cpp, linear_amx.cpp): a
// block's scale and its 32 codes as signed bytes, and an activation block quantised the way Q8_0
// quantises weights (scale = max|x| / 127, codes rounded to the nearest), so that a block of
// y = x W^T is dx * dw * (the integer dot product of 32 codes).
#include "kernels/cpu/isa_target.hpp"

#include <cpdit/core/dtype.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

// g++ 12 reports its own _mm512_undefined_* placeholders as (maybe-)uninitialised (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

namespace cpdit::kernels::int8_blocks {

constexpr int64_t kValues = 32;  // values per Q8_0 / Q4_0 block, and per activation block

// An f16 scale (F16C: both of the build's -march choices have it).
inline float half_at(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return _cvtsh_ss(bits);
}

// A block's scale and its 32 codes.
using BlockCodes = float (*)(const uint8_t* block, int8_t out[kValues]);

// Q8_0: f16 d, then 32 int8 codes.
inline float q8_0_codes(const uint8_t* b, int8_t out[kValues]) {
  std::memcpy(out, b + 2, kValues);
  return half_at(b);
}

// Q4_0: f16 d, then 16 bytes; value j is the low nibble of byte j, value j + 16 its high nibble; the
// code is nibble - 8.
inline float q4_0_codes(const uint8_t* b, int8_t out[kValues]) {
  for (int j = 0; j < 16; ++j) {
    out[j] = int8_t((b[2 + j] & 0x0F) - 8);
    out[j + 16] = int8_t((b[2 + j] >> 4) - 8);
  }
  return half_at(b);
}

// The decoder of a format the int8 kernels compute on, or null.
inline BlockCodes codes_of(const std::string& format) {
  return format == "Q8_0" ? q8_0_codes : format == "Q4_0" ? q4_0_codes : nullptr;
}

// x's 32 values as codes; returns the scale (0 for a block of zeros, whose codes are all 0).
CPDIT_TARGET_AVX512 inline float quantise(const float* x, int8_t codes[kValues]) {
  const __m512 lo = _mm512_loadu_ps(x), hi = _mm512_loadu_ps(x + 16);
  // Reduced through memory: GCC 12's _mm512_reduce_* warn of an uninitialised temporary of their own.
  alignas(64) float magnitudes[16];
  _mm512_store_ps(magnitudes, _mm512_max_ps(_mm512_abs_ps(lo), _mm512_abs_ps(hi)));
  const float amax = *std::max_element(magnitudes, magnitudes + 16);
  const float inverse = amax > 0 ? 127.0f / amax : 0.0f;
  // |x| * 127 / amax <= 127 (rounded, still <= 127): the int8 narrowing never saturates.
  const __m512i qlo = _mm512_cvtps_epi32(_mm512_mul_ps(lo, _mm512_set1_ps(inverse)));
  const __m512i qhi = _mm512_cvtps_epi32(_mm512_mul_ps(hi, _mm512_set1_ps(inverse)));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(codes), _mm512_cvtepi32_epi8(qlo));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + 16), _mm512_cvtepi32_epi8(qhi));
  return amax / 127.0f;
}

}  // namespace cpdit::kernels::int8_blocks

#pragma GCC diagnostic pop
