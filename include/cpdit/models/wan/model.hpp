#pragma once
// WanTransformer3DModel (Wan 2.1 / 2.2 text-to-video, and Wan 2.1 image-to-video and first-last-frame
// with image_dim set), computing what diffusers computes, with its context-parallel plan. Parameters
// carry the diffusers key names.
#include <cpdit/models/common/wan_config.hpp>
#include <cpdit/models/common/wan_layers.hpp>
#include <cpdit/models/common/wan_network.hpp>

namespace cpdit::models::wan {

// The Wan 2.1 layers live in models/common, shared with SkyReels-V2.
using common::wan::WanConfig;
using common::wan::Block, common::wan::ConditionEmbedder, common::wan::PatchEmbedding, common::wan::RotaryPosEmbed,
    common::wan::unpatchify;

// The plan diffusers declares: the RoPE tables are computed for the
// whole grid and split on the token dim afterwards; hidden_states is split at blocks.0 (patch
// embedding runs on the full latent); a per-token timestep (B, S) is split at the model input, a
// (B,) one stays whole; proj_out's output is gathered. The text and the image tokens (I2V) stay whole:
// cross-attention attends to replicated keys locally.
parallel::ContextParallelPlan wan_plan();

class WanTransformer3DModel : public common::wan::Wan21Network {
 public:
  explicit WanTransformer3DModel(const WanConfig& config);
  const WanConfig& config() const { return config_; }

  // Inputs by diffusers' argument names: hidden_states (B, in_channels, F, H, W), timestep (B,) or
  // per token (B, S), raw in [0, 1000], encoder_hidden_states (B, L, text_dim); for I2V models (image_dim
  // set) encoder_hidden_states_image (B, 257, image_dim) from the image encoder, (2B, 257, image_dim) for
  // FLF2V (a first and a last image per item). Returns {`sample`: (B, out_channels, F, H, W)}.
  nn::TensorMap forward(const nn::TensorMap& inputs) const override;

  parallel::ContextParallelPlan context_parallel_plan() const override { return wan_plan(); }

 private:
  WanConfig config_;
};

}  // namespace cpdit::models::wan
