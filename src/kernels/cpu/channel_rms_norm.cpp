// RMS norms over the channels of each position: Wan's RMS_norm (the channel vector scaled to
// length sqrt(C), then by gamma) and LTX-Video's unweighted RMSNorm (x / sqrt(mean(x^2) + eps)).
// The squares are summed in double over the channels, which are strided by the plane size, so the
// loops run position-innermost to stay contiguous.
#include "kernels/cpu/checks.hpp"

#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/image.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

namespace cpdit::kernels {
namespace {

// x * factor(sum of squares over the channels, channel count) * gamma[c] (gamma null: 1).
template <class Factor>
Tensor scale_by_channel_norm(const Tensor& x_in, const Tensor& gamma_in, const char* op, const Factor& factor_of) {
  CPDIT_CHECK(x_in.defined() && x_in.dim() >= 2, invalid_argument, op, ": x must be (B, C, ...), got ",
              x_in.defined() ? x_in.describe() : "undefined");
  Tensor x = detail::f32_input(x_in, op, "x");
  const int64_t batch = x.size(0), channels = x.size(1);
  Tensor gamma;
  if (gamma_in.defined()) {
    CPDIT_CHECK(gamma_in.numel() == channels, invalid_argument, op, ": gamma ", gamma_in.describe(), " must have ",
                channels, " elements");
    gamma = detail::f32_input(gamma_in, op, "gamma");
  }
  const int64_t positions = channels == 0 || batch == 0 ? 0 : x.numel() / (batch * channels);
  Tensor out = Tensor::empty(x.shape());
  const float* src = x.data<float>();
  const float* g = gamma.defined() ? gamma.data<float>() : nullptr;
  float* dst = out.data<float>();
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
    for (int64_t i = 0; i < n; ++i) factor[i] = float(factor_of(squares[i], channels));
    for (int64_t c = 0; c < channels; ++c) {
      const float gc = g ? g[c] : 1.0f;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[c * positions + i] = in[c * positions + i] * factor[i] * gc;
    }
  }
  return out;
}

}  // namespace

Tensor channel_rms_norm(const Tensor& x, const Tensor& gamma) {
  CPDIT_CHECK(gamma.defined(), invalid_argument, "channel_rms_norm: gamma is undefined");
  // F.normalize divides by max(norm, 1e-12): a zero vector stays zero instead of becoming NaN.
  return scale_by_channel_norm(x, gamma, "channel_rms_norm", [](double squares, int64_t channels) {
    return std::sqrt(double(channels)) / std::max(std::sqrt(squares), 1e-12);
  });
}

Tensor channel_rms_norm_eps(const Tensor& x, float eps) {
  return scale_by_channel_norm(x, Tensor(), "channel_rms_norm_eps", [eps](double squares, int64_t channels) {
    return 1.0 / std::sqrt(squares / double(channels) + double(eps));
  });
}

}  // namespace cpdit::kernels
