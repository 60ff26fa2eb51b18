#pragma once
// The modules of QwenImageTransformer2DModel, named as diffusers names them, built from the shared
// DiT layers of models/common. Activations are (B, S, D) f32.
#include <cpdit/models/common/adaptive_norm.hpp>
#include <cpdit/models/common/attention.hpp>
#include <cpdit/models/common/embeddings.hpp>
#include <cpdit/models/common/feed_forward.hpp>

#include <array>

namespace cpdit::models::qwenimage {

// QwenTimestepProjEmbeddings: forward(timestep (B,), as the pipeline passes it: t / 1000) returns temb
// (B, D) = timestep_embedder(sinusoid256(1000 · t)) — the sinusoid scales by 1000 inside.
class TimestepProjEmbeddings : public nn::Module {
 public:
  explicit TimestepProjEmbeddings(int64_t dim);
  Tensor forward(const Tensor& timestep) const;

 private:
  common::MlpEmbedder& timestep_embedder_;
};

// QwenEmbedRope: forward(img_shapes I64 (B, K, 3) = (frames, h, w) per image segment in token units,
// text_tokens) returns (image cos, image sin, text cos, text sin), each (S, head_dim). Only the first
// batch item's segments are read (diffusers does the same); rows and columns are centred (scale_rope).
class PosEmbed : public nn::Module {
 public:
  explicit PosEmbed(std::array<int64_t, 3> axes_dims);
  std::vector<Tensor> forward(const Tensor& img_shapes, int64_t text_tokens) const;

 private:
  std::array<int64_t, 3> axes_dims_;
};

// QwenImageTransformerBlock: forward(hidden_states (image), encoder_hidden_states (text),
// encoder_hidden_states_mask (B, L) bool or undefined, temb (B, D), cos, sin (tables over [text; image]),
// modulate_index) returns (encoder_hidden_states, hidden_states). Each stream has its own modulation
// (shift, scale, gate for attention, then for the MLP), LayerNorms without affine and GELU-tanh MLP;
// one joint attention over [text; image].
// With zero_cond_t, temb is (2B, D) — rows [0, B) for t, [B, 2B) for t = 0 — and modulate_index
// I64 (B, S) picks per image token which half modulates it (0: t); the text stream takes the t half.
// Without it modulate_index is undefined.
class TransformerBlock : public nn::Module {
 public:
  TransformerBlock(int64_t dim, int64_t heads, int64_t head_dim);
  std::vector<Tensor> forward(const Tensor& hidden_states, const Tensor& encoder_hidden_states,
                              const Tensor& encoder_hidden_states_mask, const Tensor& temb, const Tensor& cos,
                              const Tensor& sin, const Tensor& modulate_index = {}) const;

 private:
  common::AdaLayerNormZero& img_mod_;
  common::AdaLayerNormZero& txt_mod_;
  common::JointAttention& attn_;
  common::FeedForward& img_mlp_;
  common::FeedForward& txt_mlp_;
};

}  // namespace cpdit::models::qwenimage
