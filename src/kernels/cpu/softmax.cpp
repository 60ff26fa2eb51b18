#include "kernels/cpu/checks.hpp"
#include "kernels/cpu/exp_approx.hpp"

#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/cpu.hpp>

#include <algorithm>
#include <limits>

namespace cpdit::kernels {

Tensor softmax(const Tensor& x_in) {
  detail::check_min_dims(x_in, 1, "softmax", "x");
  Tensor x = detail::f32_input(x_in, "softmax", "x");
  const int64_t c = x.size(-1), rows = c == 0 ? 0 : x.numel() / c;
  Tensor out = Tensor::empty(x.shape());
  const float* src = x.data<float>();
  float* dst = out.data<float>();
#pragma omp parallel for num_threads(compute_threads()) if (x.numel() >= detail::kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = src + r * c;
    float* o = dst + r * c;
    float max = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : max)
    for (int64_t j = 0; j < c; ++j) max = std::max(max, in[j]);
    // A row of -inf (everything masked) has no finite maximum: it comes out NaN, as in PyTorch.
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < c; ++j) {
      o[j] = detail::exp_approx(in[j] - max);
      sum += o[j];
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) o[j] *= inv;
  }
  return out;
}

}  // namespace cpdit::kernels
