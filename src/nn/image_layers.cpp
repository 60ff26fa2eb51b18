#include <cpdit/kernels/image.hpp>
#include <cpdit/nn/image_layers.hpp>

namespace cpdit::nn {

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride, int64_t padding)
    : weight_(add_parameter("weight", {out_channels, in_channels, kernel, kernel})),
      bias_(add_parameter("bias", {out_channels})),
      geometry_{{1, stride, stride}, {0, padding, padding}, {0, padding, padding}} {}

Tensor Conv2d::forward(const Tensor& x) const { return forward(x, geometry_); }

Tensor Conv2d::forward(const Tensor& x, const kernels::ConvGeometry& geometry) const {
  return with_hooks({{"input", x}}, [&](const TensorMap& in) {
    const Tensor& input = in.at("input");
    if (input.defined() && input.dim() == 5) {  // frame by frame: a 3-D kernel one frame deep
      const Tensor& w = weight_.value;
      kernels::ConvGeometry g = geometry;
      g.stride[0] = 1;
      g.pad_before[0] = g.pad_after[0] = 0;
      return std::vector<Tensor>{kernels::conv3d(
          input, w.contiguous().reshape({w.size(0), w.size(1), 1, w.size(2), w.size(3)}), bias_.value, g)};
    }
    return std::vector<Tensor>{kernels::conv2d(input, weight_.value, bias_.value, geometry)};
  })[0];
}

GroupNorm::GroupNorm(int64_t groups, int64_t channels, float eps)
    : weight_(add_parameter("weight", {channels})), bias_(add_parameter("bias", {channels})), groups_(groups), eps_(eps) {}

Tensor GroupNorm::forward(const Tensor& x) const {
  return with_hooks({{"input", x}}, [&](const TensorMap& in) {
    return std::vector<Tensor>{kernels::group_norm(in.at("input"), groups_, weight_.value, bias_.value, eps_)};
  })[0];
}

}  // namespace cpdit::nn
