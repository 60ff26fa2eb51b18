#pragma once
// exp(x) in a form the compiler vectorises inside `#pragma omp simd` loops (glibc's expf is only
// vectorised under -ffast-math). Cephes' range reduction and polynomial: relative error about 2 ulp
// on [-87, 88]; below -87 the result is 0 (so exp(-inf) = 0), above 88 it stays at exp(88) ~ 1.7e38;
// NaN propagates.
#include <algorithm>
#include <bit>
#include <cstdint>

namespace cpdit::kernels::detail {

#pragma omp declare simd
inline float exp_approx(float x) {
  const bool underflows = x < -87.0f;
  x = std::min(std::max(x, -87.0f), 88.0f);
  // Round x / ln 2 to the nearest integer n with the 1.5 * 2^23 trick; its low bits are n itself.
  constexpr float kRound = 12582912.0f;
  float shifted = x * 1.44269504088896341f + kRound;
  float n = shifted - kRound;
  uint32_t n_bits = std::bit_cast<uint32_t>(shifted) - std::bit_cast<uint32_t>(kRound);
  float r = x - n * 0.693359375f + n * 2.12194440e-4f;  // x - n ln 2, ln 2 split in two parts
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float result = p * std::bit_cast<float>((n_bits + 127u) << 23);
  return underflows ? 0.0f : result;
}

}  // namespace cpdit::kernels::detail
