// A convolution whose kernel equals its stride sees each input element once: gather every patch
// into a row (im2col without overlap), then one Linear maps patches to tokens.
#include "kernels/cpu/checks.hpp"

#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/cpu.hpp>

namespace cpdit::kernels {

Tensor patch_embed(const Tensor& x_in, const Weight& weight_in, const Tensor& bias, std::array<int64_t, 3> kernel) {
  const Tensor& weight = weight_in.values("patch_embed");
  CPDIT_CHECK(x_in.defined() && x_in.dim() == 5, invalid_argument, "patch_embed: x must be (B, C, F, H, W), got ",
              x_in.defined() ? x_in.describe() : "undefined");
  const auto [kf, kh, kw] = kernel;
  const int64_t batch = x_in.size(0), channels = x_in.size(1);
  const int64_t frames = x_in.size(2), height = x_in.size(3), width = x_in.size(4);
  CPDIT_CHECK(kf > 0 && kh > 0 && kw > 0 && frames % kf == 0 && height % kh == 0 && width % kw == 0,
              invalid_argument, "patch_embed: x ", x_in.describe(), " is not divisible by the kernel (", kf, ", ", kh,
              ", ", kw, ")");
  CPDIT_CHECK(weight.defined() && weight.dim() == 5 && weight.size(1) == channels && weight.size(2) == kf &&
                  weight.size(3) == kh && weight.size(4) == kw,
              invalid_argument, "patch_embed: weight must be (O, ", channels, ", ", kf, ", ", kh, ", ", kw,
              "), got ", weight.defined() ? weight.describe() : "undefined");
  Tensor x = detail::f32_input(x_in, "patch_embed", "x");
  const int64_t pf = frames / kf, ph = height / kh, pw = width / kw;
  const int64_t tokens = pf * ph * pw, patch = channels * kf * kh * kw;

  // patches[b, (f, h, w), (c, i, j, l)] = x[b, c, f*kf + i, h*kh + j, w*kw + l]: the weight's order.
  Tensor patches = Tensor::empty({batch, tokens, patch});
  const float* src = x.data<float>();
  float* dst = patches.data<float>();
#pragma omp parallel for num_threads(compute_threads()) if (x.numel() >= detail::kParallelMin)
  for (int64_t bt = 0; bt < batch * tokens; ++bt) {
    const int64_t b = bt / tokens, t = bt % tokens;
    const int64_t f0 = t / (ph * pw) * kf, h0 = t / pw % ph * kh, w0 = t % pw * kw;
    float* row = dst + bt * patch;
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t i = 0; i < kf; ++i)
        for (int64_t j = 0; j < kh; ++j) {
          const float* in = src + (((b * channels + c) * frames + f0 + i) * height + h0 + j) * width + w0;
          for (int64_t l = 0; l < kw; ++l) *row++ = in[l];
        }
  }
  return linear(patches, weight.contiguous().reshape({weight.size(0), patch}), bias);
}

}  // namespace cpdit::kernels
