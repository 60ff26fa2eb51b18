#include "kernels/cpu/checks.hpp"
#include "kernels/cpu/row_stats.hpp"

#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/cpu.hpp>

namespace cpdit::kernels {

Tensor rms_norm(const Tensor& x_in, const Tensor& weight_in, float eps) {
  detail::check_min_dims(x_in, 1, "rms_norm", "x");
  Tensor x = detail::f32_input(x_in, "rms_norm", "x");
  const int64_t c = x.size(-1), rows = c == 0 ? 0 : x.numel() / c;
  Tensor weight = detail::optional_vector(weight_in, c, "rms_norm", "weight");
  Tensor out = Tensor::empty(x.shape());
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  const float* w = weight.defined() ? weight.data<float>() : nullptr;
#pragma omp parallel for num_threads(compute_threads()) if (x.numel() >= detail::kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = src + r * c;
    float* o = dst + r * c;
    const float rstd = detail::rms_rstd(in, c, eps);
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) o[j] = w ? in[j] * rstd * w[j] : in[j] * rstd;
  }
  return out;
}

}  // namespace cpdit::kernels
