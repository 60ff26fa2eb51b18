// The softmax-backward row term both backends use.
#include "attention/detail.hpp"

#include <cpdit/core/threads.hpp>

namespace cpdit::attention::detail {

Tensor rowsum_dout_out(const Tensor& dout, const Tensor& out) {
  Tensor g = dout.to(DType::f32), o = out.to(DType::f32);
  const int64_t B = g.size(0), S = g.size(1), H = g.size(2), D = g.size(3);
  Tensor dv = Tensor::empty({B, H, S});
  const float* gp = g.data<float>();
  const float* op = o.data<float>();
  float* dvp = dv.data<float>();
#pragma omp parallel for collapse(2) num_threads(compute_threads())
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < S; ++i)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t at = ((b * S + i) * H + h) * D;
        float sum = 0;
        for (int64_t d = 0; d < D; ++d) sum += gp[at + d] * op[at + d];
        dvp[(b * H + h) * S + i] = sum;
      }
  return dv;
}

}  // namespace cpdit::attention::detail
