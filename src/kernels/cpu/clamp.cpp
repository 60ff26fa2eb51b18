// Elementwise clamp (Wan's decoder clamps its output to [-1, 1]).
#include "kernels/cpu/checks.hpp"

#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/image.hpp>

namespace cpdit::kernels {

Tensor clamp(const Tensor& x_in, float lo, float hi) {
  Tensor x = detail::f32_input(x_in, "clamp", "x");
  Tensor out = Tensor::empty(x.shape());
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  const int64_t n = x.numel();
#pragma omp parallel for simd num_threads(compute_threads()) if (n >= detail::kParallelMin)
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i] < lo ? lo : (src[i] > hi ? hi : src[i]);
  return out;
}

}  // namespace cpdit::kernels
