#pragma once
// The language model of Qwen2_5_VLForConditionalGeneration (Qwen-Image's text encoder) run on text, as
// transformers computes it, with its parameter names ("model.layers.3.self_attn.q_proj.weight"):
//   x = embed_tokens(ids); per layer: x += o_proj(attn(rms(x))), x += down(silu(gate h) * up h) with
//   h = rms(x); last_hidden_state = norm(x) (hidden_states[-1], what the Qwen-Image pipelines read).
// Attention: q/k/v projections with biases, grouped-query heads (num_key_value_heads), causal over the
// real tokens (the padding mask), rotary embeddings on q and k in the rotate-half layout. Qwen2.5-VL's
// multimodal rotary reads sections of the frequencies (mrope_section) at the temporal, height and width
// positions; for text all three positions are the token index, so it is the plain rotary.
// The vision tower (visual.*) and lm_head are not part of it.
#include <cpdit/models/text/config.hpp>
#include <cpdit/models/text/encoder.hpp>
#include <cpdit/nn/embedding.hpp>
#include <cpdit/nn/layers.hpp>

namespace cpdit::models::text {

// (S, head_dim / 2) cos and sin of position p times inv_freq[i] = theta^(-2i / head_dim), in f32 as
// transformers makes them (f32 inverse frequencies and products, the cosine of the f32 angle).
struct RotaryTables {
  Tensor cos, sin;
};
RotaryTables rotary_tables(int64_t seq_len, int64_t head_dim, double theta);

class Qwen2Attention : public nn::Module {
 public:
  explicit Qwen2Attention(const Qwen2_5_VLTextConfig& config);
  // x (B, S, hidden) -> (B, S, hidden).
  Tensor forward(const Tensor& x, const RotaryTables& rotary, const attention::Mask& mask) const;

 private:
  const Qwen2_5_VLTextConfig& config_;
  nn::Linear& q_proj_;
  nn::Linear& k_proj_;
  nn::Linear& v_proj_;
  nn::Linear& o_proj_;
};

class Qwen2DecoderLayer : public nn::Module {
 public:
  explicit Qwen2DecoderLayer(const Qwen2_5_VLTextConfig& config);
  Tensor forward(const Tensor& hidden_states, const RotaryTables& rotary, const attention::Mask& mask) const;

 private:
  Qwen2Attention& self_attn_;
  nn::RMSNorm& input_layernorm_;
  nn::RMSNorm& post_attention_layernorm_;
  nn::Linear* gate_proj_ = nullptr;
  nn::Linear* up_proj_ = nullptr;
  nn::Linear* down_proj_ = nullptr;
};

class Qwen2_5_VLTextModel : public TextEncoder {
 public:
  explicit Qwen2_5_VLTextModel(const Qwen2_5_VLTextConfig& config);
  const Qwen2_5_VLTextConfig& config() const { return config_; }
  // input_ids [, attention_mask] -> last_hidden_state (after the final norm).
  nn::TensorMap forward(const nn::TensorMap& inputs) const override;

 private:
  Qwen2_5_VLTextConfig config_;
  nn::Embedding* embed_tokens_ = nullptr;
  nn::ModuleList<Qwen2DecoderLayer>* layers_ = nullptr;
  nn::RMSNorm* norm_ = nullptr;
};

}  // namespace cpdit::models::text
