#pragma once
// The layers only AutoencoderKLWan's encoder has; the rest (causal convolutions, residual, attention
// and mid blocks, the frame cache) are the decoder's (cpdit/models/vae/autoencoder_kl_wan.hpp).
#include <cpdit/models/vae/autoencoder_kl_wan.hpp>

#include <functional>
#include <vector>

namespace cpdit::models::vae {

// diffusers' WanResample "downsample2d": each frame zero-padded by one row and column after, then a
// 3x3 conv of stride 2. "downsample3d" then halves the frames with a (3,1,1) time_conv of stride 2 over
// the chunk behind the last frame of the chunk before; the first chunk passes through it unchanged.
class WanDownsample : public nn::Module {
 public:
  WanDownsample(int64_t channels, bool temporal);
  Tensor forward(const Tensor& x, FrameCache& cache) const;

 private:
  nn::Conv2d& conv_;
  CausalConv3d* time_conv_ = nullptr;
};

// conv_in, then per dim_mult entry num_res_blocks residual blocks (each followed by an attention
// block at the scales attn_scales lists) and, but for the last, a downsampler; the mid block; then
// RMS norm, SiLU and conv_out to 2 z_dim channels (mean, then log-variance).
class WanEncoder3d : public nn::Module {
 public:
  explicit WanEncoder3d(const WanVaeConfig& config);
  // One chunk (B, in_channels, 1 or 4, H, W) -> (B, 2 z_dim, 1, H/8, W/8) for Wan 2.1's layout.
  Tensor forward(const Tensor& x, FrameCache& cache) const;
  // How many times the encoder halves the frames (per later chunk) and the rows and columns.
  int64_t time_downsamples() const { return time_downsamples_; }
  int64_t space_downsamples() const { return space_downsamples_; }

 private:
  CausalConv3d& conv_in_;
  // down_blocks holds three kinds of layer in one numbered list, as diffusers' does; each step runs one.
  nn::Container& down_blocks_;
  std::vector<std::function<Tensor(const Tensor&, FrameCache&)>> down_steps_;
  WanMidBlock& mid_block_;
  WanRMSNorm& norm_out_;
  CausalConv3d& conv_out_;
  int64_t time_downsamples_ = 0, space_downsamples_ = 0;
};

}  // namespace cpdit::models::vae
