#pragma once
// T5EncoderModel (T5 v1.1) and UMT5EncoderModel, computing what transformers computes, with its
// module and parameter names ("encoder.block.3.layer.0.SelfAttention.q.weight").
//   x = embed_tokens(ids); per block: x += o(attn(rms(x))), x += wo(gelu_tanh(wi_0 h) * wi_1 h) with
//   h = rms(x); last_hidden_state = final_layer_norm(x).
// Attention logits are q.k (no 1/sqrt(d) scaling) + a learned relative-position bias per head + the
// padding mask (finfo.min on padded keys). T5 computes the bias in block 0 and every block reuses
// it; UMT5 has a bias table in every block.
#include <cpdit/models/text/config.hpp>
#include <cpdit/models/text/encoder.hpp>
#include <cpdit/nn/embedding.hpp>
#include <cpdit/nn/layers.hpp>

namespace cpdit::models::text {

// T5's bucket of a relative position (key index - query index), bidirectional: half the buckets for
// keys after the query; within each half, exact buckets below num_buckets/4, then logarithmic up to
// max_distance, the last bucket beyond.
int64_t relative_position_bucket(int64_t relative_position, int64_t num_buckets, int64_t max_distance);

// (B|1, H, S, S) additive logits bias: table[bucket(k - q), h] (table [num_buckets, H]), plus
// float's lowest on keys whose attention_mask (B, S) is 0 (undefined mask: none).
Tensor relative_position_bias(const Tensor& table, int64_t seq_len, int64_t num_buckets, int64_t max_distance,
                              const Tensor& attention_mask);

class T5Attention : public nn::Module {
 public:
  T5Attention(const T5Config& config, bool has_relative_bias);
  bool has_relative_bias() const { return bias_table_ != nullptr; }
  // The bias (incl. the padding mask) this layer's table makes; only when has_relative_bias().
  Tensor position_bias(int64_t seq_len, const Tensor& attention_mask) const;
  // x (B, S, d_model), position_bias (B|1, H, S, S) -> (B, S, d_model).
  Tensor forward(const Tensor& x, const Tensor& position_bias) const;

 private:
  const T5Config& config_;
  nn::Linear& q_;
  nn::Linear& k_;
  nn::Linear& v_;
  nn::Linear& o_;
  nn::Embedding* bias_table_ = nullptr;  // relative_attention_bias: [num_buckets, H]
};

// transformers' T5DenseGatedActDense: wo(gelu_tanh(wi_0 x) * wi_1 x).
class T5GatedFeedForward : public nn::Module {
 public:
  explicit T5GatedFeedForward(const T5Config& config);
  Tensor forward(const Tensor& x) const;

 private:
  nn::Linear& wi_0_;
  nn::Linear& wi_1_;
  nn::Linear& wo_;
};

// encoder.block.i: forward(hidden_states, position_bias, attention_mask) returns (hidden_states,
// position_bias) for T5 (block 0 makes the bias, later blocks pass on the one they are given) and
// (hidden_states) for UMT5 (each block makes its own), as transformers' blocks return them.
class T5Block : public nn::Module {
 public:
  T5Block(const T5Config& config, bool has_relative_bias);
  std::vector<Tensor> forward(const Tensor& hidden_states, const Tensor& position_bias,
                              const Tensor& attention_mask) const;

 private:
  const T5Config& config_;
  T5Attention* attention_ = nullptr;
  nn::RMSNorm* attention_norm_ = nullptr;
  T5GatedFeedForward* feed_forward_ = nullptr;
  nn::RMSNorm* feed_forward_norm_ = nullptr;
};

class T5EncoderModel : public TextEncoder {
 public:
  explicit T5EncoderModel(const T5Config& config);
  const T5Config& config() const { return config_; }
  // input_ids [, attention_mask] -> last_hidden_state.
  nn::TensorMap forward(const nn::TensorMap& inputs) const override;

 private:
  T5Config config_;
  nn::Embedding* embed_tokens_ = nullptr;
  nn::ModuleList<T5Block>* blocks_ = nullptr;
  nn::RMSNorm* final_layer_norm_ = nullptr;
};

}  // namespace cpdit::models::text
