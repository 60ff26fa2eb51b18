#include "kernels/cpu/checks.hpp"

#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/cpu.hpp>

namespace cpdit::kernels {

Tensor rope(const Tensor& x_in, const Tensor& cos_in, const Tensor& sin_in) {
  CPDIT_CHECK(x_in.defined() && x_in.dim() == 4, invalid_argument, "rope: x must be (B, S, H, D), got ",
              x_in.defined() ? x_in.describe() : "undefined");
  const int64_t batch = x_in.size(0), seq = x_in.size(1), heads = x_in.size(2), d = x_in.size(3);
  CPDIT_CHECK(d % 2 == 0, invalid_argument, "rope: head dim ", d, " of x ", x_in.describe(),
              " must be even (pairs (2i, 2i+1) rotate together)");
  for (const Tensor* table : {&cos_in, &sin_in}) {
    CPDIT_CHECK(table->defined() && table->dim() >= 1 && table->size(-1) == d && table->numel() == seq * d,
                invalid_argument, "rope: cos/sin must hold (S, D) = (", seq, ", ", d, ") values, got ",
                table->defined() ? table->describe() : "undefined");
  }
  Tensor x = detail::f32_input(x_in, "rope", "x");
  Tensor cos = detail::f32_input(cos_in, "rope", "cos");
  Tensor sin = detail::f32_input(sin_in, "rope", "sin");
  Tensor out = Tensor::empty(x.shape());
  const float* src = x.data<float>();
  const float* cos_table = cos.data<float>();
  const float* sin_table = sin.data<float>();
  float* dst = out.data<float>();
#pragma omp parallel for num_threads(compute_threads()) if (x.numel() >= detail::kParallelMin)
  for (int64_t bs = 0; bs < batch * seq; ++bs) {
    const float* c = cos_table + (bs % seq) * d;
    const float* s = sin_table + (bs % seq) * d;
    for (int64_t h = 0; h < heads; ++h) {
      const float* in = src + (bs * heads + h) * d;
      float* o = dst + (bs * heads + h) * d;
#pragma omp simd
      for (int64_t i = 0; i < d; i += 2) {
        o[i] = in[i] * c[i] - in[i + 1] * s[i];
        o[i + 1] = in[i + 1] * c[i + 1] + in[i] * s[i + 1];
      }
    }
  }
  return out;
}

}  // namespace cpdit::kernels
