#pragma once
// The modules of FluxTransformer2DModel, named as diffusers names them (spec/models.md §1.3-§1.5).
// Activations are (B, S, C) f32; modulation vectors are (B, C).
#include <cpdit/nn/layers.hpp>

namespace cpdit::models::flux {

// Linear, SiLU, Linear: diffusers' TimestepEmbedding and PixArtAlphaTextProjection(act "silu").
class MlpEmbedder : public nn::Module {
 public:
  MlpEmbedder(int64_t in, int64_t dim);
  Tensor forward(const Tensor& x) const;

 private:
  nn::Linear& linear_1_;
  nn::Linear& linear_2_;
};

// temb = timestep_embedder(sinusoid256(t)) [+ guidance_embedder(sinusoid256(g))] + text_embedder(pooled).
// t and g arrive already multiplied by 1000.
class TimeTextEmbed : public nn::Module {
 public:
  TimeTextEmbed(int64_t dim, int64_t pooled_dim, bool guidance);
  Tensor forward(const Tensor& timestep, const Tensor& guidance, const Tensor& pooled) const;

 private:
  MlpEmbedder& timestep_embedder_;
  MlpEmbedder* guidance_embedder_ = nullptr;
  MlpEmbedder& text_embedder_;
};

// Sinusoidal embedding, flip_sin_to_cos: (B,) -> (B, channels) = [cos(t f_j), sin(t f_j)],
// f_j = exp(-ln(10000) j / (channels/2)).
Tensor timestep_sinusoid(const Tensor& t, int64_t channels);

// 3-axis RoPE tables from ids (N, 3): outputs cos, sin, each (N, sum(axes)), pair-repeated.
class PosEmbed : public nn::Module {
 public:
  explicit PosEmbed(std::vector<int64_t> axes_dims);
  std::vector<Tensor> forward(const Tensor& ids) const;

 private:
  std::vector<int64_t> axes_dims_;
};

// Joint (double-stream) attention when `joint`, else the single-stream pre-only form.
class Attention : public nn::Module {
 public:
  Attention(int64_t dim, int64_t heads, int64_t head_dim, bool joint);
  // Joint: returns (image output, text output) after to_out / to_add_out. Single: one output, the
  // raw attention (B, S, D), with no output projection.
  std::vector<Tensor> forward(const Tensor& hidden_states, const Tensor& encoder_hidden_states,
                              const Tensor& cos, const Tensor& sin) const;

 private:
  Tensor project(const nn::Linear& proj, const nn::RMSNorm* norm, const Tensor& x) const;  // -> (B, S, H, Dh)
  int64_t heads_, head_dim_;
  nn::RMSNorm& norm_q_;
  nn::RMSNorm& norm_k_;
  nn::Linear& to_q_;
  nn::Linear& to_k_;
  nn::Linear& to_v_;
  nn::RMSNorm* norm_added_q_ = nullptr;
  nn::RMSNorm* norm_added_k_ = nullptr;
  nn::Linear* add_q_proj_ = nullptr;
  nn::Linear* add_k_proj_ = nullptr;
  nn::Linear* add_v_proj_ = nullptr;
  nn::Linear* to_out_ = nullptr;
  nn::Linear* to_add_out_ = nullptr;
};

// net.0.proj (D -> F), GELU(tanh), net.2 (F -> D).
class FeedForward : public nn::Module {
 public:
  FeedForward(int64_t dim, int64_t hidden);
  Tensor forward(const Tensor& x) const;

 private:
  nn::Container& net_;
  nn::Linear& proj_in_;
  nn::Linear& proj_out_;
};

// linear(SiLU(emb)) (B, chunks*dim) cut into `chunks` vectors (B, dim), in checkpoint order.
std::vector<Tensor> modulation(const nn::Linear& linear, const Tensor& emb, int chunks);

// The modulation of AdaLayerNormZero (6 chunks) and AdaLayerNormZeroSingle (3 chunks).
class AdaNorm : public nn::Module {
 public:
  AdaNorm(int64_t dim, int chunks);
  std::vector<Tensor> forward(const Tensor& emb) const;

 private:
  nn::Linear& linear_;
  int chunks_;
};

// AdaLayerNormContinuous (norm_out): LN(x) (1 + scale) + shift with (scale, shift) = chunk2 — scale first.
class AdaLayerNormContinuous : public nn::Module {
 public:
  explicit AdaLayerNormContinuous(int64_t dim);
  Tensor forward(const Tensor& x, const Tensor& emb) const;

 private:
  nn::Linear& linear_;
};

// Double-stream block: forward returns (encoder_hidden_states, hidden_states), as diffusers does.
class DoubleBlock : public nn::Module {
 public:
  DoubleBlock(int64_t dim, int64_t heads, int64_t head_dim);
  std::vector<Tensor> forward(const Tensor& hidden_states, const Tensor& encoder_hidden_states,
                              const Tensor& temb, const Tensor& cos, const Tensor& sin) const;

 private:
  AdaNorm& norm1_;          // shift, scale, gate (attention); shift, scale, gate (MLP)
  AdaNorm& norm1_context_;
  Attention& attn_;
  FeedForward& ff_;
  FeedForward& ff_context_;
};

// Single-stream block over [text; image]: forward returns (encoder_hidden_states, hidden_states).
class SingleBlock : public nn::Module {
 public:
  SingleBlock(int64_t dim, int64_t heads, int64_t head_dim);
  std::vector<Tensor> forward(const Tensor& hidden_states, const Tensor& encoder_hidden_states,
                              const Tensor& temb, const Tensor& cos, const Tensor& sin) const;

 private:
  AdaNorm& norm_;  // shift, scale, gate
  nn::Linear& proj_mlp_;
  Attention& attn_;
  nn::Linear& proj_out_;
};

}  // namespace cpdit::models::flux
