// The flash kernel's row operations (flash_rows.hpp): an AVX-512 variant (AVX512-BF16 for the one
// that writes bf16) compiled for it in every build and a portable loop, picked per call by kernel_isa().
#include "kernels/cpu/flash_rows.hpp"

#include "kernels/cpu/isa_target.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

// g++ 12 reports its own _mm512_undefined_* placeholders as maybe-uninitialised (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/cpu/tile_rows.hpp"

#include <immintrin.h>

namespace cpdit::kernels::flash {
namespace {

using tile_rows::lanes;

bool use_avx512() { return kernel_isa() >= Isa::avx512; }

// exp(x) = 2^(x log2 e) = 2^n 2^f with n = round(x log2 e) and f = x log2 e - n (|f| <= 1/2, one
// rounding: a fused multiply-subtract); 2^f = 1 + f q(f) with q of degree 5, fitted for the least
// maximum relative error on [-1/2, 1/2] (2e-9 exactly, under 1 ulp in f32); times 2^n by scalef. The
// f32 log2 e is 1.3e-8 off, a relative error of 1.3e-8 |x| in the result: within 1 ulp of the largest
// weight of a softmax row wherever a weight counts. Three vector operations fewer than Cephes' exp
// (ln 2 in two parts, a degree-7 polynomial): the softmax pass is about a seventh of flash
// attention's work at head dim 64.
// No upper clamp: a large n makes scalef return +inf, as exp overflows. Below -104, where exp(x) is
// under half the least denormal and rounds to 0, the result is set to 0 rather than computed: there
// scalef's result underflows, and each such lane cost a microcode assist (a causal mask's -inf
// scores made its diagonal tiles several times slower than unmasked ones). Denormal results above
// -104 stay correct; x is raised to at least -120 for the lanes zeroed, and a NaN x passes the
// comparison and max (its second operand), so NaN propagates.
CPDIT_TARGET_AVX512 inline __m512 exp512(__m512 x) {
  const __m512 log2e = _mm512_set1_ps(1.44269504088896341f);
  const __mmask16 nonzero = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-104.0f), _CMP_NLT_UQ);  // x >= -104, or NaN
  const __m512 xc = _mm512_max_ps(_mm512_set1_ps(-120.0f), x);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_fmsub_ps(xc, log2e, n);
  __m512 q = _mm512_set1_ps(1.535335904918611e-4f);
  q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(1.3398876180872321e-3f));
  q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(9.618437848985195e-3f));
  q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(5.5503323674201965e-2f));
  q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(2.4022647738456726e-1f));
  q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(6.931471824645996e-1f));
  return _mm512_maskz_scalef_ps(nonzero, _mm512_fmadd_ps(q, f, _mm512_set1_ps(1.0f)), n);
}

// 2^t for weights that are rounded to bf16 right after (the bf16 forward's P): as exp512 from its
// n and f on, but 2^f = 1 + f q(f) with q of degree 3 (fitted likewise: 2.9e-6 relative at most, a
// 700th of the bf16 rounding that follows; the f32 sum of the unrounded weights, the LSE's, moves by as
// little). Two multiply-adds fewer. A t below -126 gives 0, not a denormal or an underflow: each such
// lane cost a microcode assist, and a row of 100 keys (28 lanes past it at -inf) ran at 0.4x a row of
// 96. The weights lost are below 2^-126 of the row's largest; -inf still weighs exactly 0 and NaN
// passes through.
CPDIT_TARGET_AVX512 inline __m512 exp2_for_bf16(__m512 t) {
  const __m512 lowest = _mm512_set1_ps(-126.0f);
  const __mmask16 normal = _mm512_cmp_ps_mask(t, lowest, _CMP_NLT_UQ);  // t >= -126, or NaN
  const __m512 tc = _mm512_max_ps(lowest, t);
  const __m512 n = _mm512_roundscale_ps(tc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(tc, n);
  __m512 q = _mm512_set1_ps(9.582851082086563e-3f);
  q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(5.590642988681793e-2f));
  q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(2.4024099111557007e-1f));
  q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(6.931241750717163e-1f));
  return _mm512_maskz_scalef_ps(normal, _mm512_fmadd_ps(q, f, _mm512_set1_ps(1.0f)), n);
}

CPDIT_TARGET_AVX512 float row_max_avx512(const float* x, int64_t n) {
  __m512 m = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < n; j += 16) {
    __mmask16 k = lanes(n - j);
    m = _mm512_mask_max_ps(m, k, m, _mm512_maskz_loadu_ps(k, x + j));
  }
  return _mm512_reduce_max_ps(m);
}

CPDIT_TARGET_AVX512 float exp_shift_sum_avx512(float* x, int64_t n, float shift) {
  const __m512 s = _mm512_set1_ps(shift);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    __mmask16 k = lanes(n - j);
    __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), s));
    _mm512_mask_storeu_ps(x + j, k, e);
    sum = _mm512_mask_add_ps(sum, k, sum, e);
  }
  return _mm512_reduce_add_ps(sum);
}

// The 16 weights from x[j] on (x a + b, lanes past n -inf); a function of its own, not a lambda: a
// lambda does not inherit its caller's target, and a build without -mavx512f cannot inline it.
CPDIT_TARGET_AVX512 inline __m512 weights_from(const float* x, int64_t n, int64_t j, __m512 a, __m512 b) {
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  return exp2_for_bf16(_mm512_fmadd_ps(_mm512_mask_loadu_ps(neg_inf, lanes(n - j), x + j), a, b));
}

// exp(scale x - shift) = 2^t with t = x (scale log2 e) - shift log2 e, one multiply-add. Rounding the
// two constants to f32 moves t by about 2^-24 (|scale x| + |shift|) log2 e, a relative error of 2e-6 in
// the weights that count (|scale x - shift| small) for scores up to about 20. 32 weights a step, so
// one instruction rounds them and one full 64-byte store writes them; lanes past n load -inf and come
// out 0.
CPDIT_TARGET_AVX512_BF16 float exp_to_bf16_sum_avx512(const float* x, int64_t n, float scale, float shift, bf16* p,
                                                      int64_t n_padded) {
  constexpr float kLog2e = 1.44269504088896341f;
  const __m512 a = _mm512_set1_ps(scale * kLog2e), b = _mm512_set1_ps(-shift * kLog2e);
  __m512 sum = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j < n; j += 32) {
    const __m512 lo = weights_from(x, n, j, a, b), hi = weights_from(x, n, j + 16, a, b);
    sum = _mm512_add_ps(sum, _mm512_add_ps(lo, hi));
    _mm512_storeu_si512(p + j, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
  }
  for (; j < n_padded; j += 32) _mm512_storeu_si512(p + j, _mm512_setzero_si512());
  return _mm512_reduce_add_ps(sum);
}

CPDIT_TARGET_AVX512 void softmax_grad_avx512(float* dp, const float* p, int64_t n, float dv) {
  const __m512 d = _mm512_set1_ps(dv);
  for (int64_t j = 0; j < n; j += 16) {
    __mmask16 k = lanes(n - j);
    __m512 g = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, p + j), _mm512_sub_ps(_mm512_maskz_loadu_ps(k, dp + j), d));
    _mm512_mask_storeu_ps(dp + j, k, g);
  }
}

// max(m_old, max_c st) for the 16 queries from r (k of them valid).
CPDIT_TARGET_AVX512 __m512 column_max(const float* st, int64_t ld, int64_t cols, int64_t r, __mmask16 k,
                                      __m512 m_old) {
  // Four running maxima: one chain would wait out max's latency (4 cycles) on every key, 4x the loads' time.
  __m512 part[4] = {m_old, m_old, m_old, m_old};
  int64_t c = 0;
  for (; c + 4 <= cols; c += 4)
    for (int i = 0; i < 4; ++i) part[i] = _mm512_max_ps(part[i], _mm512_maskz_loadu_ps(k, st + (c + i) * ld + r));
  for (; c < cols; ++c) part[0] = _mm512_max_ps(part[0], _mm512_maskz_loadu_ps(k, st + c * ld + r));
  return _mm512_max_ps(_mm512_max_ps(part[0], part[1]), _mm512_max_ps(part[2], part[3]));
}

CPDIT_TARGET_AVX512 void online_softmax_columns_avx512(float* st, int64_t ld, int64_t cols, int64_t rows,
                                                     const float* tile_max, float* m, float* l, float* alpha) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < rows; r += 16) {
    const __mmask16 k = lanes(rows - r);
    const __m512 m_old = _mm512_maskz_loadu_ps(k, m + r);
    const __m512 m_new = tile_max ? _mm512_max_ps(m_old, _mm512_maskz_loadu_ps(k, tile_max + r))
                                  : column_max(st, ld, cols, r, k, m_old);
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
}

}  // namespace

float row_max(const float* x, int64_t n) {
  if (use_avx512()) return row_max_avx512(x, n);
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) m = std::fmax(m, x[j]);
  return m;
}

float exp_shift_sum(float* x, int64_t n, float shift) {
  if (use_avx512()) return exp_shift_sum_avx512(x, n, shift);
  float sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += (x[j] = std::exp(x[j] - shift));
  return sum;
}

float exp_to_bf16_sum(const float* x, int64_t n, float scale, float shift, bf16* p, int64_t n_padded) {
  if (kernel_isa() >= Isa::avx512_bf16) return exp_to_bf16_sum_avx512(x, n, scale, shift, p, n_padded);
  float sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    const float e = std::exp(scale * x[j] - shift);
    sum += e;
    p[j] = f32_to_bf16(e);
  }
  std::fill(p + n, p + n_padded, bf16{0});
  return sum;
}

void softmax_grad(float* dp, const float* p, int64_t n, float dv) {
  if (use_avx512()) return softmax_grad_avx512(dp, p, n, dv);
  for (int64_t j = 0; j < n; ++j) dp[j] = p[j] * (dp[j] - dv);
}

void online_softmax_columns(float* st, int64_t ld, int64_t cols, int64_t rows, const float* tile_max, float* m,
                            float* l, float* alpha) {
  if (use_avx512()) return online_softmax_columns_avx512(st, ld, cols, rows, tile_max, m, l, alpha);
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < rows; ++r) {
    float m_new = m[r];
    if (tile_max) m_new = std::fmax(m_new, tile_max[r]);
    else
      for (int64_t c = 0; c < cols; ++c) m_new = std::fmax(m_new, st[c * ld + r]);
    const float shift = m_new == kNegInf ? 0.0f : m_new;
    float sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += (st[c * ld + r] = std::exp(st[c * ld + r] - shift));
    alpha[r] = std::exp(m[r] - shift);
    l[r] = l[r] * alpha[r] + sum;
    m[r] = m_new;
  }
}

}  // namespace cpdit::kernels::flash

#pragma GCC diagnostic pop
