#pragma once
// The modules of FluxTransformer2DModel, named as diffusers names them,
// built from the shared DiT layers of models/common. Activations are (B, S, C) f32; modulation
// vectors are (B, C).
#include <cpdit/models/common/adaptive_norm.hpp>
#include <cpdit/models/common/attention.hpp>
#include <cpdit/models/common/embeddings.hpp>
#include <cpdit/models/common/feed_forward.hpp>

namespace cpdit::models::flux {

// temb = timestep_embedder(sinusoid256(t)) [+ guidance_embedder(sinusoid256(g))] + text_embedder(pooled).
// t and g arrive already multiplied by 1000.
class TimeTextEmbed : public nn::Module {
 public:
  TimeTextEmbed(int64_t dim, int64_t pooled_dim, bool guidance);
  Tensor forward(const Tensor& timestep, const Tensor& guidance, const Tensor& pooled) const;

 private:
  common::MlpEmbedder& timestep_embedder_;
  common::MlpEmbedder* guidance_embedder_ = nullptr;
  common::MlpEmbedder& text_embedder_;
};

// FluxPosEmbed: 3-axis RoPE tables from ids (N, 3): outputs cos, sin, each (N, sum(axes)), pair-repeated.
class PosEmbed : public nn::Module {
 public:
  explicit PosEmbed(std::vector<int64_t> axes_dims);
  std::vector<Tensor> forward(const Tensor& ids) const;

 private:
  std::vector<int64_t> axes_dims_;
};

// Double-stream block: forward returns (encoder_hidden_states, hidden_states), as diffusers does.
class DoubleBlock : public nn::Module {
 public:
  DoubleBlock(int64_t dim, int64_t heads, int64_t head_dim);
  std::vector<Tensor> forward(const Tensor& hidden_states, const Tensor& encoder_hidden_states,
                              const Tensor& temb, const Tensor& cos, const Tensor& sin) const;

 private:
  common::AdaLayerNormZero& norm1_;  // shift, scale, gate (attention); shift, scale, gate (MLP)
  common::AdaLayerNormZero& norm1_context_;
  common::JointAttention& attn_;
  common::FeedForward& ff_;
  common::FeedForward& ff_context_;
};

// Single-stream block over [text; image]: forward returns (encoder_hidden_states, hidden_states).
class SingleBlock : public nn::Module {
 public:
  SingleBlock(int64_t dim, int64_t heads, int64_t head_dim);
  std::vector<Tensor> forward(const Tensor& hidden_states, const Tensor& encoder_hidden_states,
                              const Tensor& temb, const Tensor& cos, const Tensor& sin) const;

 private:
  common::AdaLayerNormZero& norm_;  // shift, scale, gate
  nn::Linear& proj_mlp_;
  common::Attention& attn_;  // pre-only: no output projection
  nn::Linear& proj_out_;
};

}  // namespace cpdit::models::flux
