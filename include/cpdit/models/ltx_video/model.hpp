#pragma once
// LTXVideoTransformer3DModel (LTX-Video text-to-video), computing what diffusers computes, with its
// context-parallel plan. Parameters carry the diffusers key names.
#include <cpdit/models/common/adaptive_norm.hpp>
#include <cpdit/models/common/embeddings.hpp>
#include <cpdit/models/ltx_video/blocks.hpp>
#include <cpdit/models/ltx_video/config.hpp>
#include <cpdit/nn/model.hpp>

namespace cpdit::models::ltx_video {

// The plan diffusers declares: the model input splits the video tokens, the text and its mask (and a
// per-token timestep with the tokens), so cross-attention runs on a rank's share of the text keys
// with the mask share that belongs to them; the RoPE tables are built whole and split; proj_out's
// output is gathered.
parallel::ContextParallelPlan ltx_video_plan();

class LTXVideoTransformer3DModel : public nn::Model {
 public:
  explicit LTXVideoTransformer3DModel(const LtxVideoConfig& config);
  const LtxVideoConfig& config() const { return config_; }

  // Inputs by diffusers' argument names: hidden_states (B, S, in_channels) latent tokens row-major
  // over (frames, height, width); encoder_hidden_states (B, L, caption_channels); encoder_attention_mask
  // (B, L) bool or integer, optional (1 = a real text token); timestep (B,), (B, 1) or per token
  // (B, S), raw 0..1000; num_frames, height, width (1,) integers with S = their product;
  // rope_interpolation_scale (3,), optional. Returns {`sample`: (B, S, out_channels)}.
  nn::TensorMap forward(const nn::TensorMap& inputs) const override;

  parallel::ContextParallelPlan context_parallel_plan() const override { return ltx_video_plan(); }

 private:
  LtxVideoConfig config_;
  nn::Linear& proj_in_;
  common::AdaLayerNormSingle& time_embed_;
  common::MlpEmbedder& caption_projection_;
  RotaryPosEmbed& rope_;
  nn::ModuleList<TransformerBlock>& transformer_blocks_;
  nn::LayerNorm& norm_out_;
  nn::Linear& proj_out_;
  nn::Parameter& scale_shift_table_;  // (2, D): shift, scale of the output head
};

}  // namespace cpdit::models::ltx_video
