#pragma once
// Row operations of the tiled softmax (flash attention): the work between the two GEMMs of a tile.
// AVX-512 where kernel_isa() (kernels/isa.hpp) allows it, a portable loop otherwise. exp(-inf) is
// exactly 0, so masked scores (set to -inf) drop out without a branch.
#include <cstdint>

namespace cpdit::kernels::flash {

// max over x[0..n); -inf for n == 0.
float row_max(const float* x, int64_t n);

// x[j] = exp(x[j] - shift); returns the sum of the new values. shift must be finite.
float exp_shift_sum(float* x, int64_t n, float shift);

// dp[j] = p[j] * (dp[j] - dv): the softmax backward, dS = P o (dP - rowsum(dO o O)).
void softmax_grad(float* dp, const float* p, int64_t n, float dv);

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
