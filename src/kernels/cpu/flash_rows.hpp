#pragma once
// Row operations of the tiled softmax (flash attention): the work between the two GEMMs of a tile.
// AVX-512 when the compiler targets it, a portable loop otherwise. exp(-inf) is exactly 0, so masked
// scores (set to -inf) drop out without a branch.
#include <cmath>
#include <cstdint>
#include <limits>

#if defined(__AVX512F__)
// g++ 12 reports its own _mm512_undefined_* placeholders as maybe-uninitialised (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#endif

namespace cpdit::kernels::flash {

#if defined(__AVX512F__)
// Cephes' exp: x = n ln2 + r, |r| <= ln2/2, degree-6 polynomial in r, times 2^n via scalef
// (relative error ~2 ulp). Below -88 the result is flushed to 0; NaN propagates.
inline __m512 exp512(__m512 x) {
  const __m512 xc = _mm512_min_ps(_mm512_set1_ps(88.0f), _mm512_max_ps(_mm512_set1_ps(-88.0f), x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-88.0f), _CMP_NLT_UQ);
  return _mm512_maskz_mov_ps(keep, _mm512_scalef_ps(p, n));
}

inline __mmask16 tail_mask(int64_t remaining) {
  return remaining >= 16 ? __mmask16(0xffff) : __mmask16((1u << remaining) - 1);
}
#endif

// max over x[0..n); -inf for n == 0.
inline float row_max(const float* x, int64_t n) {
#if defined(__AVX512F__)
  __m512 m = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < n; j += 16) {
    __mmask16 k = tail_mask(n - j);
    m = _mm512_mask_max_ps(m, k, m, _mm512_maskz_loadu_ps(k, x + j));
  }
  return _mm512_reduce_max_ps(m);
#else
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) m = std::fmax(m, x[j]);
  return m;
#endif
}

// x[j] = exp(x[j] - shift); returns the sum of the new values. shift must be finite.
inline float exp_shift_sum(float* x, int64_t n, float shift) {
#if defined(__AVX512F__)
  const __m512 s = _mm512_set1_ps(shift);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    __mmask16 k = tail_mask(n - j);
    __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), s));
    _mm512_mask_storeu_ps(x + j, k, e);
    sum = _mm512_mask_add_ps(sum, k, sum, e);
  }
  return _mm512_reduce_add_ps(sum);
#else
  float sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += (x[j] = std::exp(x[j] - shift));
  return sum;
#endif
}

// dp[j] = p[j] * (dp[j] - dv): the softmax backward, dS = P o (dP - rowsum(dO o O)).
inline void softmax_grad(float* dp, const float* p, int64_t n, float dv) {
#if defined(__AVX512F__)
  const __m512 d = _mm512_set1_ps(dv);
  for (int64_t j = 0; j < n; j += 16) {
    __mmask16 k = tail_mask(n - j);
    __m512 g = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, p + j),
                             _mm512_sub_ps(_mm512_maskz_loadu_ps(k, dp + j), d));
    _mm512_mask_storeu_ps(dp + j, k, g);
  }
#else
  for (int64_t j = 0; j < n; ++j) dp[j] = p[j] * (dp[j] - dv);
#endif
}

inline void scale_row(float* x, int64_t n, float a) {
  for (int64_t j = 0; j < n; ++j) x[j] *= a;
}

// One key tile of the online softmax on key-major scores (the f32 forward's layout): st holds
// cols x rows scores with row stride ld, so query r's scores are column r. Per query r:
//   m' = max(m, max_c st);  st = exp(st - m');  l = l alpha + sum_c st;  alpha = exp(m - m');  m = m'
// where a query that has seen only masked keys (m' = -inf) keeps m = -inf, l = 0, gets P = 0 and
// alpha = 0. alpha[r] is what the caller rescales its output accumulator row r by.
inline void online_softmax_columns(float* st, int64_t ld, int64_t cols, int64_t rows, float* m, float* l,
                                   float* alpha) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
#if defined(__AVX512F__)
  for (int64_t r = 0; r < rows; r += 16) {
    const __mmask16 k = tail_mask(rows - r);
    const __m512 m_old = _mm512_maskz_loadu_ps(k, m + r);
    __m512 m_new = m_old;
    for (int64_t c = 0; c < cols; ++c) m_new = _mm512_max_ps(m_new, _mm512_maskz_loadu_ps(k, st + c * ld + r));
    // A fully masked column shifts by 0, so exp(-inf - 0) = 0 instead of exp(-inf + inf) = NaN.
    const __m512 shift =
        _mm512_mask_blend_ps(_mm512_cmp_ps_mask(m_new, _mm512_set1_ps(kNegInf), _CMP_EQ_OQ), m_new, _mm512_setzero_ps());
    __m512 sum = _mm512_setzero_ps();
    for (int64_t c = 0; c < cols; ++c) {
      const __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, st + c * ld + r), shift));
      _mm512_mask_storeu_ps(st + c * ld + r, k, e);
      sum = _mm512_add_ps(sum, e);
    }
    const __m512 a = exp512(_mm512_sub_ps(m_old, shift));
    _mm512_mask_storeu_ps(alpha + r, k, a);
    _mm512_mask_storeu_ps(l + r, k, _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, l + r), a, sum));
    _mm512_mask_storeu_ps(m + r, k, m_new);
  }
#else
  for (int64_t r = 0; r < rows; ++r) {
    float m_new = m[r];
    for (int64_t c = 0; c < cols; ++c) m_new = std::fmax(m_new, st[c * ld + r]);
    const float shift = m_new == kNegInf ? 0.0f : m_new;
    float sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += (st[c * ld + r] = std::exp(st[c * ld + r] - shift));
    alpha[r] = std::exp(m[r] - shift);
    l[r] = l[r] * alpha[r] + sum;
    m[r] = m_new;
  }
#endif
}

}  // namespace cpdit::kernels::flash

#if defined(__AVX512F__)
#pragma GCC diagnostic pop
#endif
