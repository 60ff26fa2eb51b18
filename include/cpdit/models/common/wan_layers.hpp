#pragma once
// The Wan 2.1 modules, named as diffusers names them, built from the
// shared DiT layers: WanTransformer3DModel and SkyReelsV2Transformer3DModel (a Wan 2.1 network with
// per-frame timesteps and block-causal self-attention) are both made of them.
// Activations are (B, S, D) f32. Modulation vectors are (B, 1, D), or (B, S, D) when the timestep is
// per token (Wan 2.2 TI2V).
#include <cpdit/models/common/adaptive_norm.hpp>
#include <cpdit/models/common/attention.hpp>
#include <cpdit/models/common/embeddings.hpp>
#include <cpdit/models/common/feed_forward.hpp>
#include <cpdit/parallel/plan.hpp>

#include <array>
#include <string>

namespace cpdit::models::common::wan {

// 3-axis RoPE tables for the whole latent grid: forward(hidden_states (B, C, F, H, W)) returns
// (cos, sin), each (1, S, 1, head_dim) over the F/pt x H/ph x W/pw token grid (row-major). Only the
// latent's shape is read. The head dim splits t / h / w = head_dim - 2 h_dim / h_dim / h_dim with
// h_dim = 2 floor(head_dim / 6); positions start at 0 on every axis.
class RotaryPosEmbed : public nn::Module {
 public:
  RotaryPosEmbed(int64_t head_dim, std::array<int64_t, 3> patch_size, int64_t max_seq_len);
  std::vector<Tensor> forward(const Tensor& hidden_states) const;

 private:
  std::array<int64_t, 3> axes_dims_;  // t, h, w
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

// The image encoder's tokens (B, L, image_dim) -> (B, L, D), as diffusers' WanImageEmbedding: norm1
// (LayerNorm with weight and bias, eps 1e-5: FP32LayerNorm's default), ff (net.0.proj image_dim ->
// image_dim, exact GELU, net.2 -> D), norm2. With a pos_embed table (FLF2V: pos_embed_seq_len = 2 x L),
// the tokens of a first and a last image, (2B, L, image_dim) with the two images of an item next to each
// other, are read as one sequence (B, 2L, image_dim) of the same memory and the table is added first.
class ImageEmbedding : public nn::Module {
 public:
  ImageEmbedding(int64_t image_dim, int64_t dim, int64_t pos_embed_seq_len);  // 0: no pos_embed
  Tensor forward(const Tensor& encoder_hidden_states_image) const;

 private:
  int64_t image_dim_;
  nn::Parameter* pos_embed_ = nullptr;  // [1, pos_embed_seq_len, image_dim]
  nn::LayerNorm& norm1_;
  common::FeedForward& ff_;
  nn::LayerNorm& norm2_;
};

// forward(timestep (B,) or (B, S) raw in [0, 1000], encoder_hidden_states (B, L, text_dim)
// [, encoder_hidden_states_image]) returns (temb (B, D) | (B, S, D), timestep_proj (B, 6D) | (B, S, 6D),
// text (B, L, D) [, image (B, L_img, D)]). The image tokens are required by, and only taken by, an
// embedder built with image_dim (the I2V / FLF2V models).
// The sinusoid of the raw timestep is computed in float32 as Wan does, or in float64 and rounded
// once as SkyReels-V2 does (the two differ in the last bits of arguments up to 1000).
enum class SinusoidPrecision { f32, f64 };
class ConditionEmbedder : public nn::Module {
 public:
  ConditionEmbedder(int64_t dim, int64_t freq_dim, int64_t text_dim,
                    SinusoidPrecision precision = SinusoidPrecision::f32, int64_t image_dim = 0,
                    int64_t pos_embed_seq_len = 0);
  std::vector<Tensor> forward(const Tensor& timestep, const Tensor& encoder_hidden_states,
                              const Tensor& encoder_hidden_states_image = {}) const;

 private:
  int64_t freq_dim_;
  SinusoidPrecision precision_;
  common::MlpEmbedder& time_embedder_;  // TimestepEmbedding: SiLU
  nn::Linear& time_proj_;
  common::MlpEmbedder& text_embedder_;  // PixArtAlphaTextProjection: GELU-tanh
  ImageEmbedding* image_embedder_ = nullptr;
};

// One transformer block: forward(hidden_states, encoder_hidden_states (projected text), temb
// (timestep_proj: (B, 6, D) or (B, S, 6, D)), rotary_cos, rotary_sin, self-attention mask, projected
// image tokens) returns hidden_states. The mask is a position rule (SkyReels-V2's block-causal frames)
// or none. A block built with image_keys (I2V) attends to the image tokens in its cross-attention
// beside the text; diffusers hands them over concatenated before the text and cuts them off again
// there, taking the last 512 tokens as the text; here they stay two tensors, so any text length works.
class Block : public nn::Module {
 public:
  Block(int64_t dim, int64_t heads, int64_t head_dim, int64_t ffn_dim, bool cross_attn_norm, float eps,
        bool image_keys = false);
  Tensor forward(const Tensor& hidden_states, const Tensor& encoder_hidden_states, const Tensor& temb,
                 const Tensor& rotary_cos, const Tensor& rotary_sin, const attention::Mask& self_attention_mask = {},
                 const Tensor& encoder_hidden_states_image = {}) const;

 private:
  float eps_;
  common::Attention& attn1_;  // self: RoPE, keys sharded under context parallelism
  common::Attention& attn2_;  // cross: keys from the text, no RoPE, replicated on every rank
  nn::LayerNorm* norm2_ = nullptr;  // the cross-attention LayerNorm (affine); absent without cross_attn_norm
  common::FeedForward& ffn_;
  nn::Parameter& scale_shift_table_;  // [1, 6, D]: shift, scale, gate, c_shift, c_scale, c_gate
};

// (B, S, pt*ph*pw*C) tokens -> (B, C, F, H, W), the proj_out channel of (pt, ph, pw, c) being
// ((pt*ph_size + ph)*pw_size + pw)*C + c.
Tensor unpatchify(const Tensor& tokens, std::array<int64_t, 3> patch_size, std::array<int64_t, 3> grid);

// The latent's grid of patches (frames, rows, columns), after checking hidden_states (B, in_channels,
// F, H, W) and encoder_hidden_states (B, L, text_dim) against the config; `model` names it in errors.
std::array<int64_t, 3> checked_patch_grid(const Tensor& hidden_states, const Tensor& encoder_hidden_states,
                                          int64_t in_channels, std::array<int64_t, 3> patch_size, int64_t text_dim,
                                          const std::string& model);

// The split every Wan 2.1 network shares: the RoPE tables split with the tokens, `blocks.0` splits
// hidden_states on the token dim, `proj_out` gathers it. Each model adds how its timestep follows.
parallel::ContextParallelPlan token_split_plan();

}  // namespace cpdit::models::common::wan
