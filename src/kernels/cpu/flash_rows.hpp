#pragma once
// Row operations of the tiled softmax (flash attention): the work between the two GEMMs of a tile.
// AVX-512 where kernel_isa() (kernels/isa.hpp) allows it, a portable loop otherwise. exp(-inf) is
// exactly 0, so masked scores (set to -inf) drop out without a branch.
#include <cpdit/core/dtype.hpp>

#include <cstdint>

namespace cpdit::kernels::flash {

// max over x[0..n); -inf for n == 0.
float row_max(const float* x, int64_t n);

// x[j] = exp(x[j] - shift); returns the sum of the new values. shift must be finite.
float exp_shift_sum(float* x, int64_t n, float shift);

// The bf16 forward's softmax weights for one row of unscaled scores x: p[j] = bf16(exp(scale x[j] -
// shift)) for j < n and 0 for n <= j < n_padded (a multiple of 32), the row of P that the P V product
// reads. Returns the sum of the weights before rounding, the row's share of the denominator. One pass:
// the weights go straight to bf16, never stored in f32. scale > 0, shift finite.
float exp_to_bf16_sum(const float* x, int64_t n, float scale, float shift, bf16* p, int64_t n_padded);

// dp[j] = p[j] * (dp[j] - dv): the softmax backward, dS = P o (dP - rowsum(dO o O)).
void softmax_grad(float* dp, const float* p, int64_t n, float dv);

inline void scale_row(float* x, int64_t n, float a) {
  for (int64_t j = 0; j < n; ++j) x[j] *= a;
}

// One key tile of the online softmax on key-major scores (the f32 forward's layout): st holds
// cols x rows scores with row stride ld, so query r's scores are column r. Per query r:
//   m' = max(m, max_c st);  st = exp(st - m');  l = l alpha + sum_c st;  alpha = exp(m - m');  m = m'
// where a query that has seen only masked keys (m' = -inf) keeps m = -inf, l = 0, gets P = 0 and
// alpha = 0. alpha[r] is what the caller rescales its output accumulator row r by. tile_max[r] is
// max_c st for query r where the caller has it (the score product finds it), else nullptr.
void online_softmax_columns(float* st, int64_t ld, int64_t cols, int64_t rows, const float* tile_max, float* m,
                            float* l, float* alpha);

}  // namespace cpdit::kernels::flash
