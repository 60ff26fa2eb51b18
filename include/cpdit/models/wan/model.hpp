#pragma once
// WanTransformer3DModel (Wan 2.1 / 2.2 text-to-video), computing what diffusers computes
// (spec/models.md §3), with its context-parallel plan. Parameters carry the diffusers key names.
#include <cpdit/models/wan/blocks.hpp>
#include <cpdit/models/wan/config.hpp>
#include <cpdit/nn/model.hpp>

namespace cpdit::models::wan {

// The plan diffusers declares (spec/context-parallel.md §12): the RoPE tables are computed for the
// whole grid and split on the token dim afterwards; hidden_states is split at blocks.0 (patch
// embedding runs on the full latent); a per-token timestep (B, S) is split at the model input, a
// (B,) one stays whole; proj_out's output is gathered. The text stays whole: cross-attention attends
// to replicated keys locally.
parallel::ContextParallelPlan wan_plan();

class WanTransformer3DModel : public nn::Model {
 public:
  explicit WanTransformer3DModel(const WanConfig& config);
  const WanConfig& config() const { return config_; }

  // Inputs by diffusers' argument names: hidden_states (B, in_channels, F, H, W), timestep (B,) or
  // per token (B, S), raw in [0, 1000], encoder_hidden_states (B, L, text_dim). Returns {`sample`:
  // (B, out_channels, F, H, W)}.
  nn::TensorMap forward(const nn::TensorMap& inputs) const override;

  parallel::ContextParallelPlan context_parallel_plan() const override { return wan_plan(); }

 private:
  WanConfig config_;
  RotaryPosEmbed& rope_;
  PatchEmbedding& patch_embedding_;
  ConditionEmbedder& condition_embedder_;
  nn::ModuleList<Block>& blocks_;
  nn::LayerNorm& norm_out_;
  nn::Linear& proj_out_;
  nn::Parameter& scale_shift_table_;  // [1, 2, D]: shift, scale of the output head
};

// (B, S, pt*ph*pw*C) tokens -> (B, C, F, H, W), the proj_out channel of (pt, ph, pw, c) being
// ((pt*ph_size + ph)*pw_size + pw)*C + c.
Tensor unpatchify(const Tensor& tokens, std::array<int64_t, 3> patch_size, std::array<int64_t, 3> grid);

}  // namespace cpdit::models::wan
