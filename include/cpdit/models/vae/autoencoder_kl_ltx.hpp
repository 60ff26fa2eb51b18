#pragma once
// AutoencoderKLLTXVideo's decoder (LTX-Video's video VAE: 128 latent channels, 32x in space and 8x
// in time at the released widths), computing what diffusers computes, with its parameters under
// diffusers' key names. Unlike Wan's, it decodes the whole latent video in one pass: its 3x3x3
// convolutions pad time by repeating the edge frames (both edges, or only the first when causal),
// its norms are RMS norms over channels without weights, and it upsamples by depth-to-space (a
// convolution to 8x the channels whose groups become 2x2x2 neighbours; the first frame dropped).
// The 0.9.1+ variant conditions every ResNet and the output norm on the decode timestep.
#include <cpdit/models/common/embeddings.hpp>
#include <cpdit/nn/layers.hpp>
#include <cpdit/nn/model.hpp>

#include <nlohmann/json.hpp>

#include <memory>
#include <vector>

namespace cpdit::models::vae {

// The decoder's part of diffusers' config (encoder fields are read by nobody). The pipeline
// decodes latents * latents_std / scaling_factor + latents_mean, per channel (the mean and std are
// buffers in the weights, not config fields).
struct LtxVaeConfig {
  int64_t latent_channels = 128, out_channels = 3;
  std::vector<int64_t> decoder_block_out_channels{128, 256, 512, 512};
  std::vector<int64_t> decoder_layers_per_block{4, 3, 3, 3, 4};
  std::vector<bool> decoder_spatio_temporal_scaling{true, true, true, false};
  std::vector<bool> upsample_residual{false, false, false, false};
  std::vector<int64_t> upsample_factor{1, 1, 1, 1};
  bool timestep_conditioning = false, decoder_causal = false;
  int64_t patch_size = 4, patch_size_t = 1;
  double resnet_norm_eps = 1e-6;  // the shortcut's LayerNorm (the RMS norms use 1e-8)
  double scaling_factor = 1.0;

  static LtxVaeConfig from_json(const nlohmann::json& j);  // refuses decoder_inject_noise
};

// nn.Conv3d's parameters (diffusers nests one as `conv` in its causal convolution): weight
// [out, in, k, k, k], bias [out].
class LtxConv3dParameters : public nn::Module {
 public:
  LtxConv3dParameters(int64_t in_channels, int64_t out_channels, int64_t kernel);
  nn::Parameter& weight;
  nn::Parameter& bias;
};

// Conv3d (kernel k in every dim, stride 1) whose time padding repeats the first frame k-1 times
// before (causal) or the first and last frame (k-1)/2 times each side; space is zero-padded k/2.
class LtxCausalConv3d : public nn::Module {
 public:
  LtxCausalConv3d(int64_t in_channels, int64_t out_channels, int64_t kernel, bool causal);
  Tensor forward(const Tensor& x) const;

 private:
  LtxConv3dParameters& conv_;
  int64_t kernel_;
  bool causal_;
};

// norm1 -> [x (1 + scale1) + shift1] -> SiLU -> conv1 -> norm2 -> [modulate 2] -> SiLU -> conv2, plus
// the input (through LayerNorm and a 1x1x1 conv when the channel count changes). The bracketed
// modulations exist when timestep-conditioned: temb (B, 4C) + scale_shift_table [4, C].
class LtxResnetBlock3d : public nn::Module {
 public:
  LtxResnetBlock3d(int64_t in_channels, int64_t out_channels, bool causal, bool timestep_conditioning, float eps);
  Tensor forward(const Tensor& x, const Tensor& temb) const;

 private:
  LtxCausalConv3d& conv1_;
  LtxCausalConv3d& conv2_;
  nn::LayerNorm* norm3_ = nullptr;
  LtxCausalConv3d* conv_shortcut_ = nullptr;
  nn::Parameter* scale_shift_table_ = nullptr;
};

// diffusers' PixArtAlphaCombinedTimestepSizeEmbeddings without size conditions: the 256-channel
// sinusoid through timestep_embedder (linear, SiLU, linear) -> (B, dim).
class LtxTimeEmbedder : public nn::Module {
 public:
  explicit LtxTimeEmbedder(int64_t dim);
  Tensor forward(const Tensor& timestep) const;

 private:
  common::MlpEmbedder& timestep_embedder_;
};

// Depth-to-space x2 in frames, rows and columns: conv to 8C/factor channels, each group of 8 spread
// over a 2x2x2 neighbourhood, the first frame dropped (so F frames become 2F - 1). With `residual`,
// the input spread the same way and repeated to the output width is added.
class LtxUpsampler3d : public nn::Module {
 public:
  LtxUpsampler3d(int64_t in_channels, bool causal, bool residual, int64_t factor);
  Tensor forward(const Tensor& x) const;

 private:
  LtxCausalConv3d& conv_;
  bool residual_;
  int64_t factor_;
};

// [conv_in ResNet when the width changes] -> [upsampler] -> ResNets; mid_block is the case of
// ResNets only. Timestep-conditioned blocks embed the timestep once for their ResNets.
class LtxUpBlock3d : public nn::Module {
 public:
  LtxUpBlock3d(int64_t in_channels, int64_t out_channels, int64_t layers, bool upsample, bool causal,
               bool timestep_conditioning, bool residual, int64_t factor, float eps);
  // timestep: the decoder's scaled timestep (B,), undefined when not conditioned.
  Tensor forward(const Tensor& x, const Tensor& timestep) const;

 private:
  // Set while resnets_ is built, so declared before it.
  LtxResnetBlock3d* conv_in_ = nullptr;
  LtxUpsampler3d* upsampler_ = nullptr;
  LtxTimeEmbedder* time_embedder_ = nullptr;
  nn::ModuleList<LtxResnetBlock3d>& resnets_;
};

class LtxDecoder3d : public nn::Module {
 public:
  explicit LtxDecoder3d(const LtxVaeConfig& config);
  // x (B, latent_channels, F, h, w), timestep (B,) or undefined -> (B, out_channels, 1 + 2^u (F-1),
  // 2^u p h, 2^u p w) for u upsampling blocks and patch size p.
  Tensor forward(const Tensor& x, const Tensor& timestep) const;

 private:
  LtxVaeConfig config_;
  LtxCausalConv3d& conv_in_;
  LtxUpBlock3d& mid_block_;
  nn::ModuleList<LtxUpBlock3d>& up_blocks_;
  // Set while conv_out_ is built (the output width is known then), so declared before it.
  LtxTimeEmbedder* time_embedder_ = nullptr;
  nn::Parameter* scale_shift_table_ = nullptr;
  nn::Parameter* timestep_scale_multiplier_ = nullptr;
  LtxCausalConv3d& conv_out_;
};

// Parallel decode (parallel/halo.hpp): the latent's rows are split at the decoder's input and the
// video's rows gathered at its output; every layer but the convolutions is per pixel.
parallel::ContextParallelPlan autoencoder_kl_ltx_plan();

class AutoencoderKLLTXVideo : public nn::Model {
 public:
  explicit AutoencoderKLLTXVideo(const LtxVaeConfig& config);
  const LtxVaeConfig& config() const { return config_; }
  // latents (B, C, F, h, w), already denormalised by the pipeline; timestep (B,) or (1,) the
  // pipeline's decode_timestep, required exactly when the decoder is timestep-conditioned. Not clamped.
  Tensor decode(const Tensor& latents, const Tensor& timestep = {}) const;
  // What LTXPipeline does to the transformer's latents (B, C, F, h, w) before decode: per channel
  // x * latents_std / scaling_factor + latents_mean, then for a timestep-conditioned decoder
  // (1 - s) x + s noise with s = decode_noise_scale (the pipeline's default is the decode timestep)
  // and noise of x's shape. In float32, operation by operation as PyTorch rounds them.
  Tensor prepare_latents(const Tensor& latents, const Tensor& noise = {}, float decode_noise_scale = 0.0f) const;
  // The registry's call: `latents` [, `timestep`] -> {`sample`}.
  nn::TensorMap forward(const nn::TensorMap& inputs) const override;
  parallel::ContextParallelPlan context_parallel_plan() const override { return autoencoder_kl_ltx_plan(); }

 private:
  LtxVaeConfig config_;
  LtxDecoder3d& decoder_;
  nn::Parameter& latents_mean_;
  nn::Parameter& latents_std_;
};

// As load_autoencoder_kl; accepts _class_name AutoencoderKLLTXVideo.
std::unique_ptr<AutoencoderKLLTXVideo> load_autoencoder_kl_ltx(const std::string& path,
                                                               const std::string& config_path = "");

}  // namespace cpdit::models::vae
