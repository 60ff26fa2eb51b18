#pragma once
// FluxTransformer2DModel (FLUX.1), computing what diffusers computes, with its
// context-parallel plan. Parameters carry the diffusers key names; models/flux/checkpoint.hpp also
// reads the original single-file layout.
#include <cpdit/models/flux/blocks.hpp>
#include <cpdit/models/flux/config.hpp>
#include <cpdit/nn/model.hpp>

namespace cpdit::models::flux {

// The plan diffusers declares: split hidden_states and encoder_hidden_states on dim 1 (3-dim) and
// img_ids, txt_ids on dim 0 (2-dim) at the model's input; gather proj_out's output on dim 1.
parallel::ContextParallelPlan flux_plan();

class FluxTransformer2DModel : public nn::Model {
 public:
  explicit FluxTransformer2DModel(const FluxConfig& config);
  const FluxConfig& config() const { return config_; }

  // Inputs by diffusers' argument names: hidden_states (B, N_img, in_channels),
  // encoder_hidden_states (B, N_txt, joint_attention_dim), pooled_projections (B, pooled),
  // timestep (B,) as sigma in [0, 1], img_ids (N_img, 3), txt_ids (N_txt, 3), and guidance (B,) when
  // the model has a guidance embedder. Returns {`sample`: (B, N_img, patch^2 * out_channels)}.
  nn::TensorMap forward(const nn::TensorMap& inputs) const override;

  parallel::ContextParallelPlan context_parallel_plan() const override { return flux_plan(); }

 private:
  FluxConfig config_;
  nn::Linear& x_embedder_;
  TimeTextEmbed& time_text_embed_;
  nn::Linear& context_embedder_;
  PosEmbed& pos_embed_;
  nn::ModuleList<DoubleBlock>& transformer_blocks_;
  nn::ModuleList<SingleBlock>& single_transformer_blocks_;
  common::AdaLayerNormContinuous& norm_out_;
  nn::Linear& proj_out_;
};

}  // namespace cpdit::models::flux
