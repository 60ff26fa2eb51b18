// Convolutions and GroupNorms go through the parallel layer's row-split forms, which are the plain
// kernels unless a parallel decode has bound a row split on this thread (parallel/halo.hpp).
#include <cpdit/core/error.hpp>
#include <cpdit/nn/image_layers.hpp>
#include <cpdit/parallel/halo.hpp>

namespace cpdit::nn {

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride, int64_t padding)
    : weight_(add_parameter("weight", {out_channels, in_channels, kernel, kernel})),
      bias_(add_parameter("bias", {out_channels})),
      geometry_{{1, stride, stride}, {0, padding, padding}, {0, padding, padding}} {}

Tensor Conv2d::forward(const Tensor& x) const { return forward(x, geometry_); }

Tensor Conv2d::forward(const Tensor& x, const kernels::ConvGeometry& geometry) const {
  return with_hooks({{"input", x}}, [&](const TensorMap& in) {
    const Tensor& input = in.at("input");
    CPDIT_CHECK(input.defined() && (input.dim() == 4 || input.dim() == 5), invalid_argument,
                "Conv2d: input must be (B, C, H, W) or frames (B, C, F, H, W), got ",
                input.defined() ? input.describe() : "undefined");
    // An image is a video of one frame; a video is convolved frame by frame (a kernel one frame deep).
    const Tensor video = input.dim() == 5 ? input
                                          : input.contiguous().reshape({input.size(0), input.size(1), 1,
                                                                        input.size(2), input.size(3)});
    const Tensor& w = weight_.value.values("Conv2d");
    kernels::ConvGeometry g = geometry;
    g.stride[0] = 1;
    g.pad_before[0] = g.pad_after[0] = 0;
    Tensor out = parallel::conv3d_rows(video, w.contiguous().reshape({w.size(0), w.size(1), 1, w.size(2), w.size(3)}),
                                       bias_.value.values("Conv2d"), g);
    if (input.dim() == 4) out = out.reshape({out.size(0), out.size(1), out.size(3), out.size(4)});
    return std::vector<Tensor>{out};
  })[0];
}

GroupNorm::GroupNorm(int64_t groups, int64_t channels, float eps)
    : weight_(add_parameter("weight", {channels})),
      bias_(add_parameter("bias", {channels})),
      groups_(groups),
      eps_(eps) {}

Tensor GroupNorm::forward(const Tensor& x) const {
  return with_hooks({{"input", x}}, [&](const TensorMap& in) {
    return std::vector<Tensor>{parallel::group_norm_rows(in.at("input"), groups_, weight_.value.values("GroupNorm"),
                                                           bias_.value.values("GroupNorm"), eps_)};
  })[0];
}

}  // namespace cpdit::nn
