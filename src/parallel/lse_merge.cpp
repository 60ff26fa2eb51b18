// The LSE merge with the stable scalar forms and the -inf guard.
#include <cpdit/core/error.hpp>
#include <cpdit/core/threads.hpp>
#include <cpdit/parallel/lse_merge.hpp>

#include <cmath>
#include <limits>

namespace cpdit::parallel {
namespace {

// sigmoid(x) without overflow: exp is only taken of a non-positive number.
float stable_sigmoid(float x) {
  if (x >= 0) return 1.0f / (1.0f + std::exp(-x));
  const float e = std::exp(x);
  return e / (1.0f + e);
}

float softplus(float x) { return std::max(x, 0.0f) + std::log1p(std::exp(-std::fabs(x))); }

}  // namespace

PartialAttention PartialAttention::empty(int64_t B, int64_t S, int64_t H, int64_t D) {
  return {Tensor::zeros({B, S, H, D}),
          Tensor::full({B, H, S}, -std::numeric_limits<double>::infinity())};
}

void merge_into(PartialAttention& acc, const Tensor& chunk_out, const Tensor& chunk_lse) {
  CPDIT_CHECK(chunk_out.shape() == acc.out.shape() && chunk_lse.shape() == acc.lse.shape(),
              internal, "lse merge: chunk ", chunk_out.describe(), " / lse ", chunk_lse.describe(),
              " does not match the accumulator ", acc.out.describe(), " / ", acc.lse.describe());
  const Tensor o_b = chunk_out.to(DType::f32);
  const Tensor lse_b = chunk_lse.contiguous();
  const int64_t B = acc.out.size(0), S = acc.out.size(1), H = acc.out.size(2), D = acc.out.size(3);
  float* o = acc.out.data<float>();
  float* lse = acc.lse.data<float>();
  const float* ob = o_b.data<float>();
  const float* lb = lse_b.data<float>();
#pragma omp parallel for collapse(2) num_threads(compute_threads())
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < S; ++i)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t row = (b * H + h) * S + i;
        const float la = lse[row], lbv = lb[row];
        if (std::isinf(lbv) && lbv < 0) continue;  // the chunk saw no keys for this row
        float* oa = o + ((b * S + i) * H + h) * D;
        const float* obr = ob + ((b * S + i) * H + h) * D;
        if (std::isinf(la) && la < 0) {  // first keys for this row: take the chunk as is
          for (int64_t d = 0; d < D; ++d) oa[d] = obr[d];
          lse[row] = lbv;
          continue;
        }
        const float w = stable_sigmoid(lbv - la);
        for (int64_t d = 0; d < D; ++d) oa[d] -= w * (oa[d] - obr[d]);
        lse[row] = la + softplus(lbv - la);
      }
}

}  // namespace cpdit::parallel
