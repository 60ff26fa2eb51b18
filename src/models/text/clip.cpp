#include <cpdit/attention/attention.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/text/clip.hpp>

namespace cpdit::models::text {

namespace k = kernels;

std::vector<int64_t> clip_eos_positions(const Tensor& input_ids, int64_t eos_token_id) {
  const Tensor ids = input_ids.contiguous();
  const int64_t batch = ids.size(0), len = ids.size(1);
  const int64_t* p = ids.data<int64_t>();
  std::vector<int64_t> positions(size_t(batch), 0);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t* row = p + b * len;
    int64_t& at = positions[size_t(b)];
    for (int64_t s = 0; s < len; ++s) {
      if (eos_token_id == 2 ? row[s] > row[at] : row[s] == eos_token_id) {
        at = s;
        if (eos_token_id != 2) break;
      }
    }
  }
  return positions;
}

ClipEmbeddings::ClipEmbeddings(const ClipTextConfig& config)
    : token_embedding_(add_module<nn::Embedding>("token_embedding", config.vocab_size, config.hidden_size)),
      position_embedding_(add_module<nn::Embedding>("position_embedding", config.max_position_embeddings, config.hidden_size)) {}

Tensor ClipEmbeddings::forward(const Tensor& input_ids) const {
  return with_hooks({{"input_ids", input_ids}}, [&](const nn::TensorMap& in) {
    const Tensor& ids = in.at("input_ids");
    const int64_t len = ids.size(1), limit = position_embedding_.num_embeddings();
    CPDIT_CHECK(len <= limit, invalid_argument, "CLIP input_ids hold ", len, " tokens, more than its ", limit, " positions");
    Tensor positions = Tensor::empty({1, len}, DType::i64);
    for (int64_t s = 0; s < len; ++s) positions.data<int64_t>()[s] = s;
    return std::vector<Tensor>{k::add(token_embedding_.forward(ids), position_embedding_.forward(positions))};
  })[0];
}

ClipAttention::ClipAttention(const ClipEncoderConfig& config)
    : heads_(config.num_attention_heads),
      q_proj_(add_module<nn::Linear>("q_proj", config.hidden_size, config.hidden_size)),
      k_proj_(add_module<nn::Linear>("k_proj", config.hidden_size, config.hidden_size)),
      v_proj_(add_module<nn::Linear>("v_proj", config.hidden_size, config.hidden_size)),
      out_proj_(add_module<nn::Linear>("out_proj", config.hidden_size, config.hidden_size)) {}

Tensor ClipAttention::forward(const Tensor& x, const attention::Mask& mask) const {
  return with_hooks({{"hidden_states", x}}, [&](const nn::TensorMap& in) {
    const Tensor& h = in.at("hidden_states");
    auto heads = [&](const Tensor& t) { return t.reshape({t.size(0), t.size(1), heads_, t.size(2) / heads_}); };
    attention::Options options;  // scale 1/sqrt(head_dim), as CLIP's
    options.mask = mask;
    Tensor o = attention::dispatch(heads(q_proj_.forward(h)), heads(k_proj_.forward(h)), heads(v_proj_.forward(h)), options).out;
    return std::vector<Tensor>{out_proj_.forward(o.reshape({o.size(0), o.size(1), -1}))};
  })[0];
}

ClipEncoderLayer::ClipEncoderLayer(const ClipEncoderConfig& config)
    : quick_gelu_(config.hidden_act == "quick_gelu"),
      self_attn_(add_module<ClipAttention>("self_attn", config)),
      layer_norm1_(add_module<nn::LayerNorm>("layer_norm1", config.hidden_size, config.layer_norm_eps, /*affine=*/true)),
      layer_norm2_(add_module<nn::LayerNorm>("layer_norm2", config.hidden_size, config.layer_norm_eps, /*affine=*/true)) {
  auto& mlp = add_module<nn::Container>("mlp");
  fc1_ = &mlp.add_module<nn::Linear>("fc1", config.hidden_size, config.intermediate_size);
  fc2_ = &mlp.add_module<nn::Linear>("fc2", config.intermediate_size, config.hidden_size);
}

Tensor ClipEncoderLayer::forward(const Tensor& hidden_states, const attention::Mask& mask) const {
  return with_hooks({{"hidden_states", hidden_states}}, [&](const nn::TensorMap& in) {
    Tensor h = k::add(in.at("hidden_states"), self_attn_.forward(layer_norm1_.forward(in.at("hidden_states")), mask));
    const Tensor up = fc1_->forward(layer_norm2_.forward(h));
    k::add_(h, fc2_->forward(quick_gelu_ ? k::quick_gelu(up) : k::gelu(up, /*tanh_approx=*/false)));
    return std::vector<Tensor>{h};
  })[0];
}

CLIPTextModel::CLIPTextModel(const ClipTextConfig& config)
    : config_((config.validate(), config)),
      embeddings_(add_module<ClipEmbeddings>("embeddings", config_)),
      layers_(add_module<nn::Container>("encoder").add_module<nn::ModuleList<ClipEncoderLayer>>("layers")),
      final_layer_norm_(add_module<nn::LayerNorm>("final_layer_norm", config_.hidden_size, config_.layer_norm_eps, true)) {
  for (int64_t i = 0; i < config_.num_hidden_layers; ++i) layers_.append(config_);
}

nn::TensorMap CLIPTextModel::forward(const nn::TensorMap& inputs) const {
  const TextInputs in = checked_inputs(inputs, "CLIPTextModel");
  ForwardScope scope(*this);
  const int64_t batch = in.input_ids.size(0);
  const attention::Mask mask = causal_text_mask(in.attention_mask);
  Tensor x = embeddings_.forward(in.input_ids);
  for (ClipEncoderLayer* layer : layers_) x = layer->forward(x, mask);
  const Tensor last = final_layer_norm_.forward(x);

  const std::vector<int64_t> eos = clip_eos_positions(in.input_ids, config_.eos_token_id);
  std::vector<Tensor> rows;
  for (int64_t b = 0; b < batch; ++b) rows.push_back(last.select(0, b).narrow(0, eos[size_t(b)], 1));
  return {{"last_hidden_state", last}, {"pooler_output", cat(rows, 0).reshape({batch, config_.hidden_size})}};
}

}  // namespace cpdit::models::text
