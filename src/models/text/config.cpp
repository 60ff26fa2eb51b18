#include <cpdit/core/error.hpp>
#include <cpdit/models/text/config.hpp>
#include <cpdit/nn/config_inference.hpp>

namespace cpdit::models::text {

T5Config T5Config::from_json(const nlohmann::json& j, bool umt5) {
  T5Config c;
  c.bias_in_every_layer = umt5;
  nn::read_config_fields(j, umt5 ? "UMT5" : "T5",
                         {{"vocab_size", c.vocab_size},
                          {"d_model", c.d_model},
                          {"d_kv", c.d_kv},
                          {"d_ff", c.d_ff},
                          {"num_layers", c.num_layers},
                          {"num_heads", c.num_heads},
                          {"relative_attention_num_buckets", c.relative_attention_num_buckets},
                          {"relative_attention_max_distance", c.relative_attention_max_distance},
                          {"layer_norm_epsilon", c.layer_norm_epsilon},
                          {"feed_forward_proj", c.feed_forward_proj}});
  c.validate();
  return c;
}

void T5Config::validate() const {
  CPDIT_CHECK(vocab_size > 0 && d_model > 0 && d_kv > 0 && d_ff > 0 && num_layers > 0 && num_heads > 0, invalid_argument,
              "T5 config: vocab_size, d_model, d_kv, d_ff, num_layers and num_heads must be positive");
  CPDIT_CHECK(relative_attention_num_buckets >= 4 && relative_attention_max_distance > relative_attention_num_buckets / 4,
              invalid_argument, "T5 config: relative_attention_num_buckets (", relative_attention_num_buckets,
              ") must be >= 4 and relative_attention_max_distance (", relative_attention_max_distance,
              ") larger than a quarter of it");
  CPDIT_CHECK(feed_forward_proj == "gated-gelu", unsupported, "T5 config: feed_forward_proj '", feed_forward_proj,
              "' is not served (T5 v1.1 and UMT5 use 'gated-gelu')");
  CPDIT_CHECK(layer_norm_epsilon > 0, invalid_argument, "T5 config: layer_norm_epsilon must be positive");
}

namespace {

// The encoder fields' config.json names, for a tower's reader.
std::vector<nn::ConfigField> encoder_fields(ClipEncoderConfig& c) {
  return {{"hidden_size", c.hidden_size},         {"intermediate_size", c.intermediate_size},
          {"num_hidden_layers", c.num_hidden_layers}, {"num_attention_heads", c.num_attention_heads},
          {"hidden_act", c.hidden_act},           {"layer_norm_eps", c.layer_norm_eps}};
}

// A full CLIPModel config nests a tower's fields under `key` (text_config, vision_config).
const nlohmann::json& tower(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_object() ? j[key] : j;
}

}  // namespace

void ClipEncoderConfig::validate(const char* model) const {
  CPDIT_CHECK(hidden_size > 0 && intermediate_size > 0 && num_hidden_layers > 0 && num_attention_heads > 0,
              invalid_argument, model, " config: sizes and counts must be positive");
  CPDIT_CHECK(hidden_size % num_attention_heads == 0, invalid_argument, model, " config: hidden_size ", hidden_size,
              " is not a multiple of num_attention_heads ", num_attention_heads);
  CPDIT_CHECK(hidden_act == "quick_gelu" || hidden_act == "gelu", unsupported, model, " config: hidden_act '",
              hidden_act, "' is not served (quick_gelu or gelu)");
  CPDIT_CHECK(layer_norm_eps > 0, invalid_argument, model, " config: layer_norm_eps must be positive");
}

ClipTextConfig ClipTextConfig::from_json(const nlohmann::json& j) {
  ClipTextConfig c;
  std::vector<nn::ConfigField> fields = encoder_fields(c);
  fields.insert(fields.end(), {{"vocab_size", c.vocab_size},
                               {"max_position_embeddings", c.max_position_embeddings},
                               {"eos_token_id", c.eos_token_id}});
  nn::read_config_fields(tower(j, "text_config"), "CLIP", fields);
  c.validate();
  return c;
}

void ClipTextConfig::validate() const {
  ClipEncoderConfig::validate("CLIP");
  CPDIT_CHECK(vocab_size > 0 && max_position_embeddings > 0, invalid_argument,
              "CLIP config: sizes and counts must be positive");
}

ClipVisionConfig ClipVisionConfig::from_json(const nlohmann::json& j) {
  ClipVisionConfig c;
  std::vector<nn::ConfigField> fields = encoder_fields(c);
  fields.insert(fields.end(), {{"num_channels", c.num_channels},
                               {"image_size", c.image_size},
                               {"patch_size", c.patch_size}});
  nn::read_config_fields(tower(j, "vision_config"), "CLIP vision", fields);
  c.validate();
  return c;
}

void ClipVisionConfig::validate() const {
  ClipEncoderConfig::validate("CLIP vision");
  CPDIT_CHECK(num_channels > 0 && patch_size > 0 && image_size >= patch_size, invalid_argument,
              "CLIP vision config: num_channels and patch_size must be positive and image_size (", image_size,
              ") at least patch_size (", patch_size, ")");
}

Qwen2_5_VLTextConfig Qwen2_5_VLTextConfig::from_json(const nlohmann::json& j) {
  Qwen2_5_VLTextConfig c;
  const nlohmann::json& text = tower(j, "text_config");
  nn::read_config_fields(text, "Qwen2.5-VL",
                         {{"vocab_size", c.vocab_size},
                          {"hidden_size", c.hidden_size},
                          {"intermediate_size", c.intermediate_size},
                          {"num_hidden_layers", c.num_hidden_layers},
                          {"num_attention_heads", c.num_attention_heads},
                          {"num_key_value_heads", c.num_key_value_heads},
                          {"rms_norm_eps", c.rms_norm_eps},
                          {"rope_theta", c.rope_theta},
                          {"hidden_act", c.hidden_act}});
  // transformers 5 keeps rope_theta in rope_parameters.
  for (const char* key : {"rope_parameters", "rope_scaling"})
    if (text.is_object() && text.contains(key) && text[key].is_object() && text[key].contains("rope_theta"))
      nn::read_config_fields(text[key], "Qwen2.5-VL", {{"rope_theta", c.rope_theta}});
  c.validate();
  return c;
}

void Qwen2_5_VLTextConfig::validate() const {
  nn::require_positive("Qwen2.5-VL", {{"vocab_size", vocab_size},
                                      {"hidden_size", hidden_size},
                                      {"intermediate_size", intermediate_size},
                                      {"num_hidden_layers", num_hidden_layers},
                                      {"num_attention_heads", num_attention_heads},
                                      {"num_key_value_heads", num_key_value_heads}});
  CPDIT_CHECK(hidden_size % num_attention_heads == 0 && head_dim() % 2 == 0, invalid_argument,
              "Qwen2.5-VL config: hidden_size ", hidden_size, " must split into num_attention_heads ",
              num_attention_heads, " heads of an even width");
  CPDIT_CHECK(num_attention_heads % num_key_value_heads == 0, invalid_argument, "Qwen2.5-VL config: num_attention_heads ",
              num_attention_heads, " is not a multiple of num_key_value_heads ", num_key_value_heads);
  CPDIT_CHECK(hidden_act == "silu", unsupported, "Qwen2.5-VL config: hidden_act '", hidden_act,
              "' is not served (silu)");
  CPDIT_CHECK(rms_norm_eps > 0 && rope_theta > 1, invalid_argument,
              "Qwen2.5-VL config: rms_norm_eps must be positive and rope_theta above 1");
}

}  // namespace cpdit::models::text
