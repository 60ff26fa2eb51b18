#pragma once
// AutoencoderKL (FLUX.1's VAE and the Stable Diffusion family): its decoder and encoder, computing what
// diffusers' Decoder and Encoder compute, with their parameters under diffusers' key names
// ("decoder.up_blocks.0.resnets.1.conv2.weight"). Both are the raw networks: the pipeline applies
// scaling_factor and shift_factor.
#include <cpdit/models/vae/config.hpp>
#include <cpdit/nn/image_layers.hpp>
#include <cpdit/nn/layers.hpp>
#include <cpdit/nn/model.hpp>

#include <memory>

namespace cpdit::models::vae {

// norm1 -> SiLU -> conv1 -> norm2 -> SiLU -> conv2, plus the input (through a 1x1 conv_shortcut when
// the channel count changes). GroupNorm eps 1e-6.
class ResnetBlock2D : public nn::Module {
 public:
  ResnetBlock2D(int64_t in_channels, int64_t out_channels, int64_t groups);
  Tensor forward(const Tensor& x) const;

 private:
  nn::GroupNorm& norm1_;
  nn::Conv2d& conv1_;
  nn::GroupNorm& norm2_;
  nn::Conv2d& conv2_;
  nn::Conv2d* conv_shortcut_ = nullptr;
};

// Single-head self-attention over the pixels of (B, C, H, W) (head dim C), after a GroupNorm, with a
// residual connection.
class SpatialAttention : public nn::Module {
 public:
  SpatialAttention(int64_t channels, int64_t groups);
  Tensor forward(const Tensor& x) const;

 private:
  nn::GroupNorm& group_norm_;
  nn::Linear& to_q_;
  nn::Linear& to_k_;
  nn::Linear& to_v_;
  nn::Linear& to_out_;
};

// resnet, attention, resnet (UNetMidBlock2D without a time embedding).
class MidBlock2D : public nn::Module {
 public:
  MidBlock2D(int64_t channels, int64_t groups, bool attention);
  Tensor forward(const Tensor& x) const;

 private:
  nn::ModuleList<ResnetBlock2D>& resnets_;
  nn::ModuleList<SpatialAttention>& attentions_;
};

// layers resnets, then (unless last) nearest x2 and a 3x3 conv (UpDecoderBlock2D).
class UpDecoderBlock2D : public nn::Module {
 public:
  UpDecoderBlock2D(int64_t in_channels, int64_t out_channels, int64_t layers, int64_t groups, bool upsample);
  Tensor forward(const Tensor& x) const;

 private:
  nn::ModuleList<ResnetBlock2D>& resnets_;
  nn::Conv2d* upsample_conv_ = nullptr;
};

// layers resnets, then (unless last) a 3x3 conv of stride 2 after zero padding on the bottom and
// right only (DownEncoderBlock2D with downsample_padding 0).
class DownEncoderBlock2D : public nn::Module {
 public:
  DownEncoderBlock2D(int64_t in_channels, int64_t out_channels, int64_t layers, int64_t groups, bool downsample);
  Tensor forward(const Tensor& x) const;

 private:
  nn::ModuleList<ResnetBlock2D>& resnets_;
  nn::Conv2d* downsample_conv_ = nullptr;
};

class KLEncoder : public nn::Module {
 public:
  explicit KLEncoder(const KLConfig& config);
  // (B, in_channels, H, W) -> (B, 2 latent_channels, H / 2^k, W / 2^k): mean, then log-variance.
  Tensor forward(const Tensor& sample) const;

 private:
  nn::Conv2d& conv_in_;
  nn::ModuleList<DownEncoderBlock2D>& down_blocks_;
  MidBlock2D& mid_block_;
  nn::GroupNorm& conv_norm_out_;
  nn::Conv2d& conv_out_;
};

class KLDecoder : public nn::Module {
 public:
  explicit KLDecoder(const KLConfig& config);
  Tensor forward(const Tensor& z) const;  // (B, latent_channels, h, w) -> (B, out_channels, 2^k h, 2^k w)

 private:
  nn::Conv2d& conv_in_;
  MidBlock2D& mid_block_;
  nn::ModuleList<UpDecoderBlock2D>& up_blocks_;
  nn::GroupNorm& conv_norm_out_;
  nn::Conv2d& conv_out_;
};

// Parallel decode (parallel/halo.hpp): the latent's rows are split at the decoder's input and the
// image's rows gathered at its output; in between each rank decodes its band of rows.
parallel::ContextParallelPlan autoencoder_kl_plan();

class AutoencoderKL : public nn::Model {
 public:
  explicit AutoencoderKL(const KLConfig& config);
  const KLConfig& config() const { return config_; }
  // latents (B, latent_channels, h, w), already unscaled by the pipeline -> sample (B, 3, 8h, 8w)
  // for FLUX.1's four blocks.
  Tensor decode(const Tensor& latents) const;
  // The registry's call: `latents` -> {`sample`: decode(latents)}, or `sample` -> {`latent`: the mean
  // half of encode(sample)}.
  nn::TensorMap forward(const nn::TensorMap& inputs) const override;
  // image (B, in_channels, H, W) in [-1, 1] -> the posterior's moments (B, 2 latent_channels, h, w):
  // channels [0, C) the mean, [C, 2C) the log-variance (diffusers clamps it to [-30, 20] when it
  // samples). One rank only: the encoder has no row-split plan.
  Tensor encode(const Tensor& image) const;
  parallel::ContextParallelPlan context_parallel_plan() const override { return autoencoder_kl_plan(); }

 private:
  KLConfig config_;
  KLEncoder& encoder_;
  KLDecoder& decoder_;
  nn::Conv2d* quant_conv_ = nullptr;
  nn::Conv2d* post_quant_conv_ = nullptr;
};

// Reads a diffusers AutoencoderKL: `path` is a folder (config.json + weights), an index json or one
// .safetensors file; `config_path` overrides the folder's config.json.
std::unique_ptr<AutoencoderKL> load_autoencoder_kl(const std::string& path, const std::string& config_path = "");

}  // namespace cpdit::models::vae
