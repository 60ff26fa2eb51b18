#pragma once
// The modules of LTXVideoTransformer3DModel, named as diffusers names them, built from the shared
// DiT layers of models/common. Activations are (B, S, D) f32.
#include <cpdit/models/common/attention.hpp>
#include <cpdit/models/common/feed_forward.hpp>
#include <cpdit/models/common/rope.hpp>

#include <array>
#include <optional>

namespace cpdit::models::ltx_video {

// LTXVideoRotaryPosEmbed: forward(the latent grid (frames, height, width) in tokens, the pipeline's
// rope_interpolation_scale when given) returns (cos, sin), each (1, S, inner) over the whole inner
// width (rotated before the head split), tokens row-major over (f, h, w).
class RotaryPosEmbed : public nn::Module {
 public:
  RotaryPosEmbed(int64_t dim, int64_t patch_size, int64_t patch_size_t);
  std::vector<Tensor> forward(std::array<int64_t, 3> grid, const std::optional<std::array<double, 3>>& scale) const;

 private:
  int64_t dim_;
  common::FractionalRope options_;
};

// LTXVideoTransformerBlock: forward(hidden_states (B, S, D), encoder_hidden_states (B, L, D) (the
// projected caption), temb (B, 6, D) or per token (B, S, 6, D), cos, sin (1, S, D),
// encoder_attention_mask (B, L) bool or undefined) returns hidden_states. RMSNorm without affine,
// modulated, into self-attention with RoPE, gated; cross-attention to the text on the unnormed
// tokens, ungated, the mask hiding padded text keys; RMSNorm, modulated, GELU-tanh FFN, gated. The
// text keys are split across ranks with the tokens (the plan splits the text at the model input).
class TransformerBlock : public nn::Module {
 public:
  TransformerBlock(int64_t dim, int64_t heads, int64_t head_dim, float eps);
  Tensor forward(const Tensor& hidden_states, const Tensor& encoder_hidden_states, const Tensor& temb,
                 const Tensor& cos, const Tensor& sin, const Tensor& encoder_attention_mask) const;

 private:
  common::Attention& attn1_;
  common::Attention& attn2_;
  common::FeedForward& ff_;
  nn::Parameter& scale_shift_table_;  // (6, D): shift, scale, gate for attention, then for the FFN
  float eps_;
};

}  // namespace cpdit::models::ltx_video
