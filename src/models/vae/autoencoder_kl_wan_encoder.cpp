#include "models/vae/autoencoder_kl_wan_encoder.hpp"

#include "models/vae/checkpoint.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/kernels/image.hpp>

#include <algorithm>

namespace cpdit::models::vae {

namespace {
// Channel counts along the encoder: conv_in's output, then one per dim_mult entry.
std::vector<int64_t> encoder_dims(const WanVaeConfig& c) {
  std::vector<int64_t> dims{c.base_dim};
  for (int64_t m : c.dim_mult) dims.push_back(c.base_dim * m);
  return dims;
}

// diffusers encodes the first frame alone, then this many frames per chunk.
constexpr int64_t kFramesPerChunk = 4;
}  // namespace

WanDownsample::WanDownsample(int64_t channels, bool temporal)
    : conv_(add_module<nn::Container>("resample").add_module<nn::Conv2d>("1", channels, channels, 3, 2, 0)) {
  if (temporal)
    time_conv_ = &add_module<CausalConv3d>("time_conv", channels, channels, std::array<int64_t, 3>{3, 1, 1},
                                           std::array<int64_t, 3>{0, 0, 0}, /*time_stride=*/2);
}

Tensor WanDownsample::forward(const Tensor& x, FrameCache& cache) const {
  return with_hooks({{"x", x}}, [&](const nn::TensorMap& in) {
    kernels::ConvGeometry g = conv_.geometry();
    g.pad_after = {0, 1, 1};  // diffusers pads (0, 1, 0, 1) before the padding-0 stride-2 conv
    Tensor h = conv_.forward(in.at("x"), g);
    if (!time_conv_) return one(h);
    // The time convolution looks at the chunk behind the last frame of the chunk before (the first
    // chunk passes through): 4 frames become 2, 2 become 1.
    Tensor& previous = cache.frames[this];
    const Tensor last = h.narrow(2, h.size(2) - 1, 1).contiguous();
    if (previous.defined()) h = time_conv_->forward(cat({previous, h}, 2));
    previous = last;
    return one(h);
  })[0];
}

WanEncoder3d::WanEncoder3d(const WanVaeConfig& c)
    : conv_in_(add_module<CausalConv3d>("conv_in", c.in_channels, c.base_dim, std::array<int64_t, 3>{3, 3, 3},
                                        std::array<int64_t, 3>{1, 1, 1})),
      down_blocks_(add_module<nn::Container>("down_blocks")),
      mid_block_(add_module<WanMidBlock>("mid_block", encoder_dims(c).back())),
      norm_out_(add_module<WanRMSNorm>("norm_out", encoder_dims(c).back(), false)),
      conv_out_(add_module<CausalConv3d>("conv_out", encoder_dims(c).back(), 2 * c.z_dim,
                                         std::array<int64_t, 3>{3, 3, 3}, std::array<int64_t, 3>{1, 1, 1})) {
  const std::vector<int64_t> dims = encoder_dims(c);
  auto next_name = [&] { return std::to_string(down_steps_.size()); };
  double scale = 1.0;  // the size relative to the input's, as attn_scales names it (exact in binary)
  for (size_t i = 0; i < c.dim_mult.size(); ++i) {
    for (int64_t r = 0; r < c.num_res_blocks; ++r) {
      const auto& block = down_blocks_.add_module<WanResidualBlock>(next_name(), r == 0 ? dims[i] : dims[i + 1],
                                                                    dims[i + 1]);
      down_steps_.push_back([&block](const Tensor& x, FrameCache& cache) { return block.forward(x, cache); });
      if (std::find(c.attn_scales.begin(), c.attn_scales.end(), scale) != c.attn_scales.end()) {
        const auto& attention = down_blocks_.add_module<WanAttentionBlock>(next_name(), dims[i + 1]);
        down_steps_.push_back([&attention](const Tensor& x, FrameCache&) { return attention.forward(x); });
      }
    }
    if (i + 1 == c.dim_mult.size()) break;  // no downsampler after the last
    const bool temporal = c.temperal_downsample[i];
    const auto& down = down_blocks_.add_module<WanDownsample>(next_name(), dims[i + 1], temporal);
    down_steps_.push_back([&down](const Tensor& x, FrameCache& cache) { return down.forward(x, cache); });
    time_downsamples_ += temporal ? 1 : 0;
    ++space_downsamples_;
    scale /= 2.0;
  }
}

Tensor WanEncoder3d::forward(const Tensor& x, FrameCache& cache) const {
  return with_hooks({{"x", x}}, [&](const nn::TensorMap& in) {
    Tensor h = conv_in_.forward(in.at("x"), &cache);
    for (const auto& step : down_steps_) h = step(h, cache);
    h = mid_block_.forward(h, cache);
    return one(conv_out_.forward(kernels::silu(norm_out_.forward(h)), &cache));
  })[0];
}

Tensor AutoencoderKLWan::encode(const Tensor& video) const {
  return encode_moments(video).narrow(1, 0, config_.z_dim).contiguous();  // the mean; the log-variance follows it
}

Tensor AutoencoderKLWan::encode_moments(const Tensor& video) const {
  // Every downsampler needs two rows and columns: H and W at least 2^(spatial downsamples).
  const int64_t least = int64_t(1) << encoder_.space_downsamples();
  CPDIT_CHECK(video.defined() && video.dim() == 5 && video.size(1) == config_.in_channels && video.size(2) >= 1 &&
                  video.size(3) >= least && video.size(4) >= least,
              invalid_argument, "AutoencoderKLWan.encode: video must be (B, ", config_.in_channels, ", F >= 1, H >= ",
              least, ", W >= ", least, "), got ", video.defined() ? video.describe() : "undefined");
  // A later chunk's four frames halve at most twice (a third time-conv would see too few frames).
  CPDIT_CHECK(encoder_.time_downsamples() <= 2, unsupported, "AutoencoderKLWan.encode: chunks of ", kFramesPerChunk,
              " frames halve in time at most twice; this config's temperal_downsample halves ",
              encoder_.time_downsamples(), " times");
  CPDIT_CHECK(!parallel_enabled(), unsupported,
              "AutoencoderKLWan.encode runs on one rank (only decode splits rows or frames); disable parallelism first");
  ForwardScope scope(*this);
  const kernels::ConvWeightScope transformed_weights;  // each layer's Winograd weights made once
  const Tensor x = video.to(DType::f32);
  FrameCache cache;
  std::vector<Tensor> chunks{encoder_.forward(x.narrow(2, 0, 1), cache)};
  // Frames after the last whole chunk are left out, as diffusers does.
  for (int64_t first = 1; first + kFramesPerChunk <= x.size(2); first += kFramesPerChunk)
    chunks.push_back(encoder_.forward(x.narrow(2, first, kFramesPerChunk), cache));
  return quant_conv_.forward(cat(chunks, 2));
}

}  // namespace cpdit::models::vae
