#pragma once
// Q8_0 and Q4_0 blocks for the kernels that compute on them (linear_int8.cpp, linear_amx.cpp): a
// block's scale (both formats start with it as f16) and its 32 codes as signed bytes, and an
// activation block quantised the way Q8_0 quantises weights (scale = max|x| / 127, codes rounded to the nearest), so that a block of
// y = x W^T is dx * dw * (the integer dot product of 32 codes).
#include "kernels/cpu/isa_target.hpp"

#include <cpdit/core/dtype.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>

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

// Q8_0: f16 d, then 32 int8 codes. Codes as signed bytes in a 256-bit register.
struct Q8_0Codes {
  CPDIT_TARGET_AVX512_VNNI static __m256i of(const uint8_t* b) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2));
  }
};

// Q4_0: f16 d, then 16 bytes; value j is the low nibble of byte j, value j + 16 its high nibble; the
// code is nibble - 8.
struct Q4_0Codes {
  CPDIT_TARGET_AVX512_VNNI static __m256i of(const uint8_t* b) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2)), low = _mm_set1_epi8(0x0F);
    const __m256i nibbles =
        _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(bytes, 4), low), _mm_and_si128(bytes, low));
    return _mm256_sub_epi8(nibbles, _mm256_set1_epi8(8));
  }
};

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
