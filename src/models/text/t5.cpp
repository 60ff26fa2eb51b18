#include <cpdit/attention/attention.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/text/t5.hpp>

namespace cpdit::models::text {

namespace k = kernels;

T5Attention::T5Attention(const T5Config& config, bool has_relative_bias)
    : config_(config),
      q_(add_module<nn::Linear>("q", config.d_model, config.num_heads * config.d_kv, /*bias=*/false)),
      k_(add_module<nn::Linear>("k", config.d_model, config.num_heads * config.d_kv, /*bias=*/false)),
      v_(add_module<nn::Linear>("v", config.d_model, config.num_heads * config.d_kv, /*bias=*/false)),
      o_(add_module<nn::Linear>("o", config.num_heads * config.d_kv, config.d_model, /*bias=*/false)) {
  if (has_relative_bias)
    bias_table_ = &add_module<nn::Embedding>("relative_attention_bias", config.relative_attention_num_buckets, config.num_heads);
}

Tensor T5Attention::position_bias(int64_t seq_len, const Tensor& attention_mask) const {
  return relative_position_bias(bias_table_->weight(), seq_len, config_.relative_attention_num_buckets,
                                config_.relative_attention_max_distance, attention_mask);
}

Tensor T5Attention::forward(const Tensor& x, const Tensor& position_bias) const {
  return with_hooks({{"hidden_states", x}, {"position_bias", position_bias}}, [&](const nn::TensorMap& in) {
    const Tensor& h = in.at("hidden_states");
    auto heads = [&](const Tensor& t) { return t.reshape({t.size(0), t.size(1), config_.num_heads, config_.d_kv}); };
    attention::Options options;
    options.mask = attention::Mask::additive(in.at("position_bias"));
    options.scale = 1.0f;  // T5 folds the 1/sqrt(d) scaling into its initialisation
    Tensor o = attention::dispatch(heads(q_.forward(h)), heads(k_.forward(h)), heads(v_.forward(h)), options).out;
    return std::vector<Tensor>{o_.forward(o.reshape({o.size(0), o.size(1), config_.num_heads * config_.d_kv}))};
  })[0];
}

T5GatedFeedForward::T5GatedFeedForward(const T5Config& config)
    : wi_0_(add_module<nn::Linear>("wi_0", config.d_model, config.d_ff, /*bias=*/false)),
      wi_1_(add_module<nn::Linear>("wi_1", config.d_model, config.d_ff, /*bias=*/false)),
      wo_(add_module<nn::Linear>("wo", config.d_ff, config.d_model, /*bias=*/false)) {}

Tensor T5GatedFeedForward::forward(const Tensor& x) const {
  return with_hooks({{"hidden_states", x}}, [&](const nn::TensorMap& in) {
    const Tensor& h = in.at("hidden_states");
    // "gated-gelu" is transformers' gelu_new: the tanh approximation.
    return std::vector<Tensor>{wo_.forward(k::mul(k::gelu(wi_0_.forward(h), /*tanh_approx=*/true), wi_1_.forward(h)))};
  })[0];
}

T5Block::T5Block(const T5Config& config, bool has_relative_bias) : config_(config) {
  auto& layers = add_module<nn::Container>("layer");
  auto& self_attention = layers.add_module<nn::Container>("0");
  attention_ = &self_attention.add_module<T5Attention>("SelfAttention", config, has_relative_bias);
  attention_norm_ = &self_attention.add_module<nn::RMSNorm>("layer_norm", config.d_model, config.layer_norm_epsilon);
  auto& feed_forward = layers.add_module<nn::Container>("1");
  feed_forward_ = &feed_forward.add_module<T5GatedFeedForward>("DenseReluDense", config);
  feed_forward_norm_ = &feed_forward.add_module<nn::RMSNorm>("layer_norm", config.d_model, config.layer_norm_epsilon);
}

std::vector<Tensor> T5Block::forward(const Tensor& hidden_states, const Tensor& position_bias,
                                     const Tensor& attention_mask) const {
  nn::TensorMap args{{"hidden_states", hidden_states}, {"position_bias", position_bias}, {"attention_mask", attention_mask}};
  return with_hooks(std::move(args), [&](const nn::TensorMap& in) {
    const Tensor bias = attention_->has_relative_bias()
                            ? attention_->position_bias(in.at("hidden_states").size(1), in.at("attention_mask"))
                            : in.at("position_bias");
    CPDIT_CHECK(bias.defined(), internal, "T5 block without a relative bias table was given no position bias");
    Tensor h = k::add(in.at("hidden_states"), attention_->forward(attention_norm_->forward(in.at("hidden_states")), bias));
    k::add_(h, feed_forward_->forward(feed_forward_norm_->forward(h)));
    if (config_.bias_in_every_layer) return std::vector<Tensor>{h};
    return std::vector<Tensor>{h, bias};
  });
}

T5EncoderModel::T5EncoderModel(const T5Config& config) : config_((config.validate(), config)) {
  // The relative-position bias is an additive (B, H, S, S) mask, which only `native` serves.
  set_attention_backend("native");
  auto& encoder = add_module<nn::Container>("encoder");
  // shared.weight and encoder.embed_tokens.weight are one tied table: the loader keeps one tensor,
  // under the name of the module that reads it.
  embed_tokens_ = &encoder.add_module<nn::Embedding>("embed_tokens", config_.vocab_size, config_.d_model);
  blocks_ = &encoder.add_module<nn::ModuleList<T5Block>>("block");
  for (int64_t i = 0; i < config_.num_layers; ++i) blocks_->append(config_, i == 0 || config_.bias_in_every_layer);
  final_layer_norm_ = &encoder.add_module<nn::RMSNorm>("final_layer_norm", config_.d_model, config_.layer_norm_epsilon);
}

nn::TensorMap T5EncoderModel::forward(const nn::TensorMap& inputs) const {
  const char* name = config_.bias_in_every_layer ? "UMT5EncoderModel" : "T5EncoderModel";
  const TextInputs in = checked_inputs(inputs, name);
  ForwardScope scope(*this);
  Tensor x = embed_tokens_->forward(in.input_ids);
  Tensor bias;
  for (T5Block* block : *blocks_) {
    std::vector<Tensor> out = block->forward(x, bias, in.attention_mask);
    x = out[0];
    if (out.size() > 1) bias = out[1];
  }
  return {{"last_hidden_state", final_layer_norm_->forward(x)}};
}

}  // namespace cpdit::models::text
