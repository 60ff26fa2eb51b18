#include <cpdit/attention/attention.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/text/qwen2_5_vl.hpp>

#include <cmath>

namespace cpdit::models::text {

namespace k = kernels;

RotaryTables rotary_tables(int64_t seq_len, int64_t head_dim, double theta) {
  const int64_t half = head_dim / 2;
  RotaryTables t{Tensor::empty({seq_len, half}), Tensor::empty({seq_len, half})};
  float* c = t.cos.data<float>();
  float* s = t.sin.data<float>();
  for (int64_t i = 0; i < half; ++i) {
    const float inv_freq = 1.0f / std::pow(float(theta), float(2 * i) / float(head_dim));
    for (int64_t p = 0; p < seq_len; ++p) {
      const float angle = float(p) * inv_freq;
      c[p * half + i] = std::cos(angle);
      s[p * half + i] = std::sin(angle);
    }
  }
  return t;
}

namespace {

// x (B, S, H, D) contiguous f32, rotated in place: the first and second halves of each head are the
// pairs (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin), transformers' rotate_half.
void rotate_half_(Tensor& x, const RotaryTables& rotary) {
  const int64_t batch = x.size(0), seq = x.size(1), heads = x.size(2), dim = x.size(3), half = dim / 2;
  float* p = x.data<float>();
  const float* cos = rotary.cos.data<float>();
  const float* sin = rotary.sin.data<float>();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < seq; ++s)
      for (int64_t h = 0; h < heads; ++h) {
        float* v = p + ((b * seq + s) * heads + h) * dim;
        for (int64_t i = 0; i < half; ++i) {
          const float x1 = v[i], x2 = v[i + half], c = cos[s * half + i], n = sin[s * half + i];
          v[i] = x1 * c - x2 * n;
          v[i + half] = x2 * c + x1 * n;
        }
      }
}

}  // namespace

Qwen2Attention::Qwen2Attention(const Qwen2_5_VLTextConfig& config)
    : config_(config),
      q_proj_(add_module<nn::Linear>("q_proj", config.hidden_size, config.num_attention_heads * config.head_dim())),
      k_proj_(add_module<nn::Linear>("k_proj", config.hidden_size, config.num_key_value_heads * config.head_dim())),
      v_proj_(add_module<nn::Linear>("v_proj", config.hidden_size, config.num_key_value_heads * config.head_dim())),
      o_proj_(add_module<nn::Linear>("o_proj", config.num_attention_heads * config.head_dim(), config.hidden_size,
                                     /*bias=*/false)) {}

Tensor Qwen2Attention::forward(const Tensor& x, const RotaryTables& rotary, const attention::Mask& mask) const {
  return with_hooks({{"hidden_states", x}}, [&](const nn::TensorMap& in) {
    const Tensor& h = in.at("hidden_states");
    const int64_t batch = h.size(0), seq = h.size(1), dim = config_.head_dim();
    auto heads = [&](const Tensor& t, int64_t n) { return t.contiguous().reshape({batch, seq, n, dim}); };
    Tensor q = heads(q_proj_.forward(h), config_.num_attention_heads);
    Tensor key = heads(k_proj_.forward(h), config_.num_key_value_heads);
    rotate_half_(q, rotary);
    rotate_half_(key, rotary);
    attention::Options options;
    options.mask = mask;
    // Grouped-query attention: the dispatcher reads each key/value head for its group of query heads.
    Tensor o = attention::dispatch(q, key, heads(v_proj_.forward(h), config_.num_key_value_heads), options).out;
    return std::vector<Tensor>{o_proj_.forward(o.reshape({batch, seq, config_.num_attention_heads * dim}))};
  })[0];
}

Qwen2DecoderLayer::Qwen2DecoderLayer(const Qwen2_5_VLTextConfig& config)
    : self_attn_(add_module<Qwen2Attention>("self_attn", config)),
      input_layernorm_(add_module<nn::RMSNorm>("input_layernorm", config.hidden_size, config.rms_norm_eps)),
      post_attention_layernorm_(
          add_module<nn::RMSNorm>("post_attention_layernorm", config.hidden_size, config.rms_norm_eps)) {
  auto& mlp = add_module<nn::Container>("mlp");
  gate_proj_ = &mlp.add_module<nn::Linear>("gate_proj", config.hidden_size, config.intermediate_size, false);
  up_proj_ = &mlp.add_module<nn::Linear>("up_proj", config.hidden_size, config.intermediate_size, false);
  down_proj_ = &mlp.add_module<nn::Linear>("down_proj", config.intermediate_size, config.hidden_size, false);
}

Tensor Qwen2DecoderLayer::forward(const Tensor& hidden_states, const RotaryTables& rotary,
                                  const attention::Mask& mask) const {
  return with_hooks({{"hidden_states", hidden_states}}, [&](const nn::TensorMap& in) {
    const Tensor& x = in.at("hidden_states");
    Tensor h = k::add(x, self_attn_.forward(input_layernorm_.forward(x), rotary, mask));
    const Tensor normed = post_attention_layernorm_.forward(h);
    k::add_(h, down_proj_->forward(k::mul(k::silu(gate_proj_->forward(normed)), up_proj_->forward(normed))));
    return std::vector<Tensor>{h};
  })[0];
}

Qwen2_5_VLTextModel::Qwen2_5_VLTextModel(const Qwen2_5_VLTextConfig& config) : config_((config.validate(), config)) {
  auto& model = add_module<nn::Container>("model");
  embed_tokens_ = &model.add_module<nn::Embedding>("embed_tokens", config_.vocab_size, config_.hidden_size);
  layers_ = &model.add_module<nn::ModuleList<Qwen2DecoderLayer>>("layers");
  for (int64_t i = 0; i < config_.num_hidden_layers; ++i) layers_->append(config_);
  norm_ = &model.add_module<nn::RMSNorm>("norm", config_.hidden_size, config_.rms_norm_eps);
}

nn::TensorMap Qwen2_5_VLTextModel::forward(const nn::TensorMap& inputs) const {
  const TextInputs in = checked_inputs(inputs, "Qwen2_5_VLForConditionalGeneration");
  ForwardScope scope(*this);
  const attention::Mask mask = causal_text_mask(in.attention_mask);
  const RotaryTables rotary = rotary_tables(in.input_ids.size(1), config_.head_dim(), config_.rope_theta);
  Tensor x = embed_tokens_->forward(in.input_ids);
  for (Qwen2DecoderLayer* layer : *layers_) x = layer->forward(x, rotary, mask);
  return {{"last_hidden_state", norm_->forward(x)}};
}

}  // namespace cpdit::models::text
