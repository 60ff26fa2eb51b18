// Wan's RMS_norm: each position's channel vector scaled to length sqrt(C), then by gamma. The norm
// is summed in double over the channels, which are strided by the plane size, so the loop runs
// position-innermost to stay contiguous.
#include "kernels/cpu/checks.hpp"

#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/image.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

namespace cpdit::kernels {

Tensor channel_rms_norm(const Tensor& x_in, const Tensor& gamma_in) {
  CPDIT_CHECK(x_in.defined() && x_in.dim() >= 2, invalid_argument, "channel_rms_norm: x must be (B, C, ...), got ",
              x_in.defined() ? x_in.describe() : "undefined");
  Tensor x = detail::f32_input(x_in, "channel_rms_norm", "x");
  const int64_t batch = x.size(0), channels = x.size(1);
  CPDIT_CHECK(gamma_in.defined() && gamma_in.numel() == channels, invalid_argument, "channel_rms_norm: gamma ",
              gamma_in.defined() ? gamma_in.describe() : "undefined", " must have ", channels, " elements");
  Tensor gamma = detail::f32_input(gamma_in, "channel_rms_norm", "gamma");
  const int64_t positions = channels == 0 || batch == 0 ? 0 : x.numel() / (batch * channels);
  Tensor out = Tensor::empty(x.shape());
  const float* src = x.data<float>();
  const float* g = gamma.data<float>();
  float* dst = out.data<float>();
  const double root_c = std::sqrt(double(channels));
  constexpr int64_t kBlock = 256;  // positions per task: a strip of every channel stays in L1/L2
  const int64_t blocks = (positions + kBlock - 1) / kBlock;
#pragma omp parallel for num_threads(compute_threads()) if (x.numel() >= detail::kParallelMin)
  for (int64_t t = 0; t < batch * blocks; ++t) {
    const int64_t b = t / blocks, p0 = t % blocks * kBlock, n = std::min(kBlock, positions - p0);
    double squares[kBlock] = {};
    const float* in = src + b * channels * positions + p0;
    float* o = dst + b * channels * positions + p0;
    for (int64_t c = 0; c < channels; ++c)
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) squares[i] += double(in[c * positions + i]) * in[c * positions + i];
    float factor[kBlock];
    // F.normalize divides by max(norm, 1e-12): a zero vector stays zero instead of becoming NaN.
    for (int64_t i = 0; i < n; ++i) factor[i] = float(root_c / std::max(std::sqrt(squares[i]), 1e-12));
    for (int64_t c = 0; c < channels; ++c)
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[c * positions + i] = in[c * positions + i] * factor[i] * g[c];
  }
  return out;
}

}  // namespace cpdit::kernels
