#pragma once
// The modules of WanTransformer3DModel, named as diffusers names them (spec/models.md §3.2-§3.4).
// Activations are (B, S, D) f32. Modulation vectors are (B, 1, D), or (B, S, D) when the timestep is
// per token (Wan 2.2 TI2V).
#include <cpdit/models/flux/blocks.hpp>  // FeedForward, MlpEmbedder, timestep_sinusoid: shared with FLUX.1
#include <cpdit/nn/layers.hpp>

#include <array>

namespace cpdit::models::wan {

// 3-axis RoPE tables for the whole latent grid: forward(hidden_states (B, C, F, H, W)) returns
// (cos, sin), each (1, S, 1, head_dim) over the F/pt x H/ph x W/pw token grid (row-major). Only the
// latent's shape is read. The head dim splits t / h / w = head_dim - 2 h_dim / h_dim / h_dim with
// h_dim = 2 floor(head_dim / 6); positions start at 0 on every axis.
class RotaryPosEmbed : public nn::Module {
 public:
  RotaryPosEmbed(int64_t head_dim, std::array<int64_t, 3> patch_size, int64_t max_seq_len);
  std::vector<Tensor> forward(const Tensor& hidden_states) const;

 private:
  std::array<int64_t, 3> axis_dims_;  // t, h, w
  std::array<int64_t, 3> patch_size_;
  int64_t max_seq_len_;
};

// Conv3d with kernel = stride = patch, returning the tokens (B, S, D) (diffusers flattens and
// transposes the convolution output right after it).
class PatchEmbedding : public nn::Module {
 public:
  PatchEmbedding(int64_t in_channels, int64_t dim, std::array<int64_t, 3> patch_size);
  Tensor forward(const Tensor& input) const;

 private:
  nn::Parameter& weight_;  // [D, C, pt, ph, pw]
  nn::Parameter& bias_;
  std::array<int64_t, 3> patch_size_;
};

// Linear, GELU(tanh), Linear: diffusers' PixArtAlphaTextProjection(act_fn "gelu_tanh").
class TextProjection : public nn::Module {
 public:
  TextProjection(int64_t in, int64_t dim);
  Tensor forward(const Tensor& caption) const;

 private:
  nn::Linear& linear_1_;
  nn::Linear& linear_2_;
};

// forward(timestep (B,) or (B, S) raw in [0, 1000], encoder_hidden_states (B, L, text_dim)) returns
// (temb (B, D) | (B, S, D), timestep_proj (B, 6D) | (B, S, 6D), text (B, L, D)).
class ConditionEmbedder : public nn::Module {
 public:
  ConditionEmbedder(int64_t dim, int64_t freq_dim, int64_t text_dim);
  std::vector<Tensor> forward(const Tensor& timestep, const Tensor& encoder_hidden_states) const;

 private:
  int64_t freq_dim_;
  flux::MlpEmbedder& time_embedder_;
  nn::Linear& time_proj_;
  TextProjection& text_embedder_;
};

// attn1 (self: RoPE, keys sharded under context parallelism) or attn2 (cross: keys from the text,
// no RoPE, replicated on every rank). q/k RMSNorm spans all heads (width D), before the head split.
class Attention : public nn::Module {
 public:
  Attention(int64_t dim, int64_t heads, int64_t head_dim, float eps);
  // Self-attention when encoder_hidden_states is undefined (then cos, sin are required).
  Tensor forward(const Tensor& hidden_states, const Tensor& encoder_hidden_states, const Tensor& cos,
                 const Tensor& sin) const;

 private:
  int64_t heads_, head_dim_;
  nn::Linear& to_q_;
  nn::Linear& to_k_;
  nn::Linear& to_v_;
  nn::Linear& to_out_;
  nn::RMSNorm& norm_q_;
  nn::RMSNorm& norm_k_;
};

// One transformer block: forward(hidden_states, encoder_hidden_states (projected text), temb
// (timestep_proj: (B, 6, D) or (B, S, 6, D)), rotary_cos, rotary_sin) returns hidden_states.
class Block : public nn::Module {
 public:
  Block(int64_t dim, int64_t heads, int64_t head_dim, int64_t ffn_dim, bool cross_attn_norm, float eps);
  Tensor forward(const Tensor& hidden_states, const Tensor& encoder_hidden_states, const Tensor& temb,
                 const Tensor& rotary_cos, const Tensor& rotary_sin) const;

 private:
  float eps_;
  Attention& attn1_;
  Attention& attn2_;
  nn::LayerNorm* norm2_ = nullptr;  // the cross-attention LayerNorm (affine); absent without cross_attn_norm
  flux::FeedForward& ffn_;
  nn::Parameter& scale_shift_table_;  // [1, 6, D]: shift, scale, gate, c_shift, c_scale, c_gate
};

// `table` [1, n, D] + `emb` (B, n, D) or (B, S, n, D) (or with one row for all n: (B, 1, D),
// (B, S, 1, D)), cut into the n modulation vectors, each (B, 1, D) or (B, S, D).
std::vector<Tensor> modulation(const Weight& table, const Tensor& emb);

}  // namespace cpdit::models::wan
