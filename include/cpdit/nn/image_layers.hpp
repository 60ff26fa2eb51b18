#pragma once
// PyTorch's image layers, named and shaped as PyTorch names and shapes them ("<path>.weight",
// "<path>.bias"): nn.Conv2d with symmetric padding and nn.GroupNorm. Convolution weights are plain
// f32 parameters.
#include <cpdit/kernels/image.hpp>
#include <cpdit/nn/module.hpp>

namespace cpdit::nn {

// weight [out, in, k, k], bias [out]; x (B, in, H, W) -> (B, out, H', W'), or a video
// (B, in, F, H, W) -> (B, out, F, H', W') convolved frame by frame (Wan applies its 2-D layers so).
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride = 1, int64_t padding = 0);
  Tensor forward(const Tensor& x) const;
  // The same convolution with other padding (the encoder's downsampling pads after only).
  Tensor forward(const Tensor& x, const kernels::ConvGeometry& geometry) const;
  kernels::ConvGeometry geometry() const { return geometry_; }

 private:
  Parameter& weight_;
  Parameter& bias_;
  kernels::ConvGeometry geometry_;
};

// GroupNorm over (B, C, ...) with affine weight and bias [C].
class GroupNorm : public Module {
 public:
  GroupNorm(int64_t groups, int64_t channels, float eps);
  Tensor forward(const Tensor& x) const;

 private:
  Parameter& weight_;
  Parameter& bias_;
  int64_t groups_;
  float eps_;
};

}  // namespace cpdit::nn
