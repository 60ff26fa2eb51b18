#pragma once
// QwenImageTransformer2DModel (Qwen-Image text-to-image), computing what diffusers computes, with its
// context-parallel plan. Parameters carry the diffusers key names.
#include <cpdit/models/qwenimage/blocks.hpp>
#include <cpdit/models/qwenimage/config.hpp>
#include <cpdit/nn/model.hpp>

namespace cpdit::models::qwenimage {

// The plan diffusers declares: the RoPE tables are computed whole (text length known before any
// split) and split on dim 0 afterwards; transformer_blocks.0 splits the image and text tokens,
// every block splits the text mask, so it follows its keys; proj_out's output is gathered. Splitting
// at the model input instead would hand pos_embed a rank's text length.
parallel::ContextParallelPlan qwenimage_plan();

class QwenImageTransformer2DModel : public nn::Model {
 public:
  explicit QwenImageTransformer2DModel(const QwenImageConfig& config);
  const QwenImageConfig& config() const { return config_; }

  // Inputs by diffusers' argument names: hidden_states (B, N, in_channels) packed latent tokens,
  // encoder_hidden_states (B, L, joint_attention_dim), encoder_hidden_states_mask (B, L) I64 or bool,
  // optional (1 = a real text token), timestep (B,) as the pipeline passes it (t / 1000), img_shapes
  // I64 (B, K, 3) = (frames, h, w) per image segment in token units, summing to N. Returns {`sample`:
  // (B, N, patch² · out_channels)}.
  nn::TensorMap forward(const nn::TensorMap& inputs) const override;

  parallel::ContextParallelPlan context_parallel_plan() const override { return qwenimage_plan(); }

 private:
  QwenImageConfig config_;
  nn::Linear& img_in_;
  nn::RMSNorm& txt_norm_;
  nn::Linear& txt_in_;
  TimestepProjEmbeddings& time_text_embed_;
  PosEmbed& pos_embed_;
  nn::ModuleList<TransformerBlock>& transformer_blocks_;
  common::AdaLayerNormContinuous& norm_out_;
  nn::Linear& proj_out_;
};

}  // namespace cpdit::models::qwenimage
