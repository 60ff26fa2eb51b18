#pragma once
// CLIPTextModel, computing what transformers computes, with its module and parameter names (without
// the `text_model.` prefix of older checkpoints; the loader strips it).
//   x = token_embedding(ids) + position_embedding(0..S-1); per layer: x += out_proj(causal attn(
//   ln1(x))), x += fc2(act(fc1(ln2(x)))); last_hidden_state = final_layer_norm(x); pooler_output =
//   last_hidden_state at each row's end-of-text position.
#include <cpdit/models/text/config.hpp>
#include <cpdit/models/text/encoder.hpp>
#include <cpdit/attention/attention.hpp>
#include <cpdit/nn/embedding.hpp>
#include <cpdit/nn/layers.hpp>

namespace cpdit::models::text {

// The end-of-text position of each row of input_ids (B, S): with eos_token_id 2 (configs written
// before transformers knew the real id) the first position of the row's largest id, as the original
// CLIP did; otherwise the first position holding eos_token_id (0 when there is none).
std::vector<int64_t> clip_eos_positions(const Tensor& input_ids, int64_t eos_token_id);

class ClipEmbeddings : public nn::Module {
 public:
  explicit ClipEmbeddings(const ClipTextConfig& config);
  Tensor forward(const Tensor& input_ids) const;  // (B, S) -> (B, S, D), S <= max_position_embeddings

 private:
  nn::Embedding& token_embedding_;
  nn::Embedding& position_embedding_;
};

// The attention and encoder layers of CLIP's text and vision towers (clip_vision.hpp).
class ClipAttention : public nn::Module {
 public:
  explicit ClipAttention(const ClipEncoderConfig& config);
  // x (B, S, D); mask: the text's causal rule, with the padding mask's key padding if any (a rule: no
  // S x S tensor); none for the vision tower.
  Tensor forward(const Tensor& x, const attention::Mask& mask) const;

 private:
  int64_t heads_;
  nn::Linear& q_proj_;
  nn::Linear& k_proj_;
  nn::Linear& v_proj_;
  nn::Linear& out_proj_;
};

class ClipEncoderLayer : public nn::Module {
 public:
  explicit ClipEncoderLayer(const ClipEncoderConfig& config);
  Tensor forward(const Tensor& hidden_states, const attention::Mask& mask) const;

 private:
  bool quick_gelu_;
  ClipAttention& self_attn_;
  nn::LayerNorm& layer_norm1_;
  nn::Linear* fc1_ = nullptr;
  nn::Linear* fc2_ = nullptr;
  nn::LayerNorm& layer_norm2_;
};

class CLIPTextModel : public TextEncoder {
 public:
  explicit CLIPTextModel(const ClipTextConfig& config);
  const ClipTextConfig& config() const { return config_; }
  // input_ids [, attention_mask] -> last_hidden_state, pooler_output.
  nn::TensorMap forward(const nn::TensorMap& inputs) const override;

 private:
  ClipTextConfig config_;
  ClipEmbeddings& embeddings_;
  nn::ModuleList<ClipEncoderLayer>& layers_;
  nn::LayerNorm& final_layer_norm_;
};

}  // namespace cpdit::models::text
