// Linear under bf16 compute for a few tokens (the AdaLN modulations: one timestep embedding per
// sample): each weight row is read once, in order, and dotted with every token by AVX512-BF16 dot
// products (bf16 x bf16 products, exact in f32, accumulated in f32, as on AMX tiles).
//
// Why not the AMX kernel: at m = 1 a Linear does 2 flops per 2-byte weight value, so it is bound by
// how fast the weight streams from memory. The AMX kernel reads 16 rows a row apart per tile load (a
// pattern the prefetchers do not follow) and pads the tokens to 32: FLUX.1's 18432 x 3072 modulation
// ran at 19 GFLOP/s there against torch's 27. Rows read front to back stream at the memory's rate.
#include "kernels/cpu/gelu_tanh.hpp"
#include "kernels/cpu/isa_target.hpp"
#include "kernels/cpu/linear_args.hpp"
#include "kernels/cpu/tile_rows.hpp"

#include <cpdit/core/threads.hpp>

#include <algorithm>

#include <immintrin.h>

namespace cpdit::kernels::detail {

namespace {

constexpr int64_t kRows = 4;    // weight rows per step: four streams from memory at once
constexpr int64_t kChunk = 32;  // bf16 values per vector
// How far ahead of its reads each row is fetched into L2: 512 values gave 1.03-1.05x over 2048 from
// memory (FLUX.1's 18432 x 3072 modulation); the prefetchers alone keep few lines in flight per row.
constexpr int64_t kAhead = 512;

// x (Tokens, k) f32 rounded to bf16, `ld` values a row, zeros past k (a whole vector's worth).
CPDIT_TARGET_AVX512_BF16 void round_tokens(const float* x, int64_t tokens, int64_t k, int64_t ld, bf16* out) {
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t c = 0; c < ld; c += kChunk) {
      const float* src = x + t * k + c;
      _mm512_storeu_si512(out + t * ld + c,
                          (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(tile_rows::lanes(k - c - 16), src + 16),
                                                       _mm512_maskz_loadu_ps(tile_rows::lanes(k - c), src)));
    }
}

// y rows' columns [row, row + rows) for every token: rows (<= kRows) weight rows against Tokens tokens.
template <int Tokens>
CPDIT_TARGET_AVX512_BF16 void dot_rows(const bf16* w, int64_t k, int64_t rows, const bf16* x, int64_t ld,
                                       float* sums) {
  __m512 acc[kRows][Tokens];
  for (auto& r : acc)
    for (auto& a : r) a = _mm512_setzero_ps();
  for (int64_t c = 0; c < k; c += kChunk) {
    const int64_t within = std::min<int64_t>(k - c, kChunk);
    __m512bh xs[Tokens];
    for (int t = 0; t < Tokens; ++t) xs[t] = (__m512bh)_mm512_loadu_si512(x + t * ld + c);
    for (int64_t r = 0; r < std::min(rows, kRows); ++r) {
      // The row's tail goes through a zero-padded copy (x has zeros there too); a dot product pairs
      // values by position, so any k works.
      alignas(64) bf16 tail[kChunk] = {};
      const bf16* values = w + r * k + c;
      _mm_prefetch(reinterpret_cast<const char*>(values + kAhead), _MM_HINT_T1);
      if (within < kChunk) values = std::copy_n(values, within, tail) - within;
      const __m512bh wv = (__m512bh)_mm512_loadu_si512(values);
      for (int t = 0; t < Tokens; ++t) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv, xs[t]);
    }
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int t = 0; t < Tokens; ++t) sums[r * Tokens + t] = _mm512_reduce_add_ps(acc[r][t]);
}

using DotRows = void (*)(const bf16*, int64_t, int64_t, const bf16*, int64_t, float*);
constexpr DotRows kDotRows[kBf16RowsMaxTokens] = {&dot_rows<1>, &dot_rows<2>, &dot_rows<3>, &dot_rows<4>};

}  // namespace

void bf16_rows_into(const LinearArgs& a, float* y) {
  CPDIT_CHECK(a.weight.defined() && a.weight.dtype() == DType::bf16 && a.m <= kBf16RowsMaxTokens &&
                  kernel_isa() >= Isa::avx512_bf16,
              unsupported, "linear: the few-token bf16 product needs a bf16 weight, at most ", kBf16RowsMaxTokens,
              " tokens and AVX512-BF16");
  if (a.m == 0 || a.n == 0) return;
  const int64_t ld = (a.k + kChunk - 1) / kChunk * kChunk;
  Tensor x = Tensor::empty({a.m * ld}, DType::bf16);
  round_tokens(a.x.data<float>(), a.m, a.k, ld, x.data<bf16>());
  const bf16* w = a.weight.data<bf16>();
  const float* bias = a.bias.defined() ? a.bias.data<float>() : nullptr;
  const DotRows dot = kDotRows[a.m - 1];
  const int64_t blocks = (a.n + kRows - 1) / kRows;
#pragma omp parallel for schedule(static) num_threads(compute_threads()) if (a.n * a.k >= kParallelMin)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t row = b * kRows, rows = std::min(kRows, a.n - row);
    float sums[kRows * kBf16RowsMaxTokens];
    dot(w + row * a.k, a.k, rows, x.data<bf16>(), ld, sums);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t t = 0; t < a.m; ++t) {
        float v = sums[r * a.m + t] + (bias ? bias[row + r] : 0.0f);
        if (a.epilogue == Epilogue::gelu_tanh) v = gelu_tanh_value(v);
        y[t * a.n + row + r] = v;
      }
  }
}

}  // namespace cpdit::kernels::detail
