#include "models/text/single_file.hpp"

#include <cpdit/core/error.hpp>

#include <algorithm>

namespace cpdit::models::text {

namespace {

const Shape& text_shape(const nn::StateDict& state, const std::string& name, const std::string& source) {
  const auto it = state.find(name);
  CPDIT_CHECK(it != state.end(), invalid_argument, source, ": no tensor ", name,
              " to read the text encoder's config from (give its config.json)");
  return it->second.shape();
}

// How many numbered entries `prefix`N. there are (0 .. N-1, checked to be all there).
int64_t numbered_entries(const nn::StateDict& state, const std::string& prefix, const std::string& source) {
  int64_t most = -1;
  for (const auto& [name, weight] : state) {
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string rest = name.substr(prefix.size());
    const size_t dot = rest.find('.');
    if (dot == 0 || dot == std::string::npos || dot > 6 || rest.find_first_not_of("0123456789") < dot) continue;
    most = std::max<int64_t>(most, std::stoll(rest.substr(0, dot)));
  }
  for (int64_t i = 0; i <= most; ++i) {
    const std::string entry = prefix + std::to_string(i) + ".";
    const bool present = std::any_of(state.begin(), state.end(), [&](const auto& kv) { return kv.first.rfind(entry, 0) == 0; });
    CPDIT_CHECK(present, invalid_argument, source, ": ", prefix, i, " is missing among ", most + 1);
  }
  return most + 1;
}

// Qwen2.5-VL-7B-Instruct's language model (its config.json; Qwen-Image's text_encoder/).
constexpr int64_t kQwen7bHidden = 3584, kQwen7bLayers = 28, kQwen7bHeads = 28;

// CLIP ViT-L/14's text tower (openai/clip-vit-large-patch14, FLUX.1's text_encoder/config.json).
constexpr int64_t kClipLHidden = 768, kClipLLayers = 12, kClipLHeads = 12, kClipLEos = 2;

}  // namespace

nn::StateDict t5_in_transformers_names(nn::StateDict state) {
  nn::StateDict out;
  for (auto& [name, weight] : state) {
    const bool bare = name.rfind("block.", 0) == 0 || name.rfind("final_layer_norm.", 0) == 0 ||
                      name.rfind("embed_tokens.", 0) == 0;
    out.emplace(bare ? "encoder." + name : name, std::move(weight));
  }
  return out;
}

nlohmann::json t5_config_from_shapes(const nn::StateDict& state, const std::string& source) {
  const Shape& embed = text_shape(state, "encoder.embed_tokens.weight", source);
  const Shape& bias = text_shape(state, "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", source);
  const Shape& q = text_shape(state, "encoder.block.0.layer.0.SelfAttention.q.weight", source);
  CPDIT_CHECK(state.count("encoder.block.0.layer.1.DenseReluDense.wi_0.weight"), unsupported, source,
              ": a T5 without the gated feed-forward (wi_0, wi_1) is not T5 v1.1 or UMT5, which cpdit runs");
  const Shape& wi = text_shape(state, "encoder.block.0.layer.1.DenseReluDense.wi_0.weight", source);
  const int64_t heads = bias.size() == 2 ? bias[1] : 0;
  CPDIT_CHECK(heads > 0 && q.size() == 2 && q[0] % heads == 0, invalid_argument, source,
              ": the attention's ", q[0], " query features do not split into the position bias's ", heads, " heads");
  return {{"vocab_size", embed[0]},
          {"d_model", embed[1]},
          {"d_kv", q[0] / heads},
          {"d_ff", wi[0]},
          {"num_layers", numbered_entries(state, "encoder.block.", source)},
          {"num_heads", heads},
          {"relative_attention_num_buckets", bias[0]},
          {"relative_attention_max_distance", 128},
          {"layer_norm_epsilon", 1e-6},
          {"feed_forward_proj", "gated-gelu"}};
}

nlohmann::json qwen2_5_vl_config_from_shapes(const nn::StateDict& state, const std::string& source) {
  const Shape& tokens = text_shape(state, "model.embed_tokens.weight", source);
  const int64_t layers = numbered_entries(state, "model.layers.", source);
  CPDIT_CHECK(tokens.size() == 2 && tokens[1] == kQwen7bHidden && layers == kQwen7bLayers, invalid_argument, source,
              ": a Qwen2.5-VL language model of width ", tokens.size() == 2 ? tokens[1] : 0, " and ", layers,
              " layers is not Qwen2.5-VL-7B's (3584, 28), the only one whose head count is known here: give its "
              "config.json");
  const int64_t head_dim = kQwen7bHidden / kQwen7bHeads;
  return {{"vocab_size", tokens[0]},
          {"hidden_size", tokens[1]},
          {"intermediate_size", text_shape(state, "model.layers.0.mlp.gate_proj.weight", source)[0]},
          {"num_hidden_layers", layers},
          {"num_attention_heads", kQwen7bHeads},
          {"num_key_value_heads", text_shape(state, "model.layers.0.self_attn.k_proj.weight", source)[0] / head_dim},
          {"rms_norm_eps", 1e-6},
          {"rope_theta", 1e6},
          {"hidden_act", "silu"}};
}

nlohmann::json clip_text_config_from_shapes(const nn::StateDict& state, const std::string& source) {
  const Shape& tokens = text_shape(state, "embeddings.token_embedding.weight", source);
  const int64_t layers = numbered_entries(state, "encoder.layers.", source);
  CPDIT_CHECK(tokens.size() == 2 && tokens[1] == kClipLHidden && layers == kClipLLayers, invalid_argument, source,
              ": a CLIP text tower of width ", tokens.size() == 2 ? tokens[1] : 0, " and ", layers,
              " layers is not CLIP ViT-L/14's (768, 12), the only one whose head count is known here: give its "
              "config.json");
  return {{"vocab_size", tokens[0]},
          {"hidden_size", tokens[1]},
          {"max_position_embeddings", text_shape(state, "embeddings.position_embedding.weight", source)[0]},
          {"intermediate_size", text_shape(state, "encoder.layers.0.mlp.fc1.weight", source)[0]},
          {"num_hidden_layers", layers},
          {"num_attention_heads", kClipLHeads},
          {"hidden_act", "quick_gelu"},
          {"layer_norm_eps", 1e-5},
          {"eos_token_id", kClipLEos}};
}

}  // namespace cpdit::models::text
