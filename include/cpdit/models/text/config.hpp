#pragma once
// Hyper-parameters of the text encoders, with transformers' config.json names and class defaults.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace cpdit::models::text {

// T5EncoderModel (T5 v1.1) and UMT5EncoderModel; defaults are T5-v1.1-XXL's widths.
struct T5Config {
  int64_t vocab_size = 32128;
  int64_t d_model = 4096;
  int64_t d_kv = 64;
  int64_t d_ff = 10240;
  int64_t num_layers = 24;
  int64_t num_heads = 64;
  int64_t relative_attention_num_buckets = 32;
  int64_t relative_attention_max_distance = 128;
  float layer_norm_epsilon = 1e-6f;
  // Only v1.1's gated GELU (tanh form) is served: "gated-gelu", i.e. dense_act_fn "gelu_new".
  std::string feed_forward_proj = "gated-gelu";
  // UMT5: every layer has its own relative-position table; T5: layer 0's serves all layers.
  bool bias_in_every_layer = false;

  static T5Config from_json(const nlohmann::json& j, bool umt5);
  void validate() const;  // throws invalid_argument / unsupported naming the field
};

// T5 names its head count num_heads (the model registry asks every config for its heads).
inline int64_t attention_heads(const T5Config& config) { return config.num_heads; }

// What CLIP's text and vision towers share: their encoder layers' widths and activation. Each tower
// sets its own defaults.
struct ClipEncoderConfig {
  int64_t hidden_size = 768;
  int64_t intermediate_size = 3072;
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 12;
  std::string hidden_act = "quick_gelu";  // or "gelu" (exact)
  float layer_norm_eps = 1e-5f;

  // Throws naming `model` ("CLIP", "CLIP vision").
  void validate(const char* model) const;
};

// CLIPTextModel; defaults are CLIP ViT-L/14's text tower (FLUX.1's text_encoder).
struct ClipTextConfig : ClipEncoderConfig {
  int64_t vocab_size = 49408;
  int64_t max_position_embeddings = 77;
  // 2 selects the legacy pooling rule (argmax of the ids); any other id, its first occurrence.
  int64_t eos_token_id = 2;

  static ClipTextConfig from_json(const nlohmann::json& j);
  void validate() const;
};

// CLIPVisionModel (the image encoder of Wan 2.1's image-to-video pipelines, open-clip ViT-H/14 in
// transformers' layout); defaults are transformers' CLIPVisionConfig's (ViT-B/32).
struct ClipVisionConfig : ClipEncoderConfig {
  int64_t num_channels = 3;
  int64_t image_size = 224;
  int64_t patch_size = 32;

  int64_t patches() const { return (image_size / patch_size) * (image_size / patch_size); }
  static ClipVisionConfig from_json(const nlohmann::json& j);
  void validate() const;
};

// Qwen2_5_VLForConditionalGeneration's language model (Qwen-Image's text encoder); defaults are
// Qwen2.5-VL-7B's. config.json nests these under text_config (transformers 5) or keeps them at the top
// (the released Qwen2.5-VL files); rope_theta and mrope_section sit in rope_parameters or rope_scaling.
struct Qwen2_5_VLTextConfig {
  int64_t vocab_size = 152064;
  int64_t hidden_size = 3584;
  int64_t intermediate_size = 18944;
  int64_t num_hidden_layers = 28;
  int64_t num_attention_heads = 28;
  int64_t num_key_value_heads = 4;
  float rms_norm_eps = 1e-6f;
  double rope_theta = 1000000.0;
  std::string hidden_act = "silu";

  int64_t head_dim() const { return hidden_size / num_attention_heads; }
  static Qwen2_5_VLTextConfig from_json(const nlohmann::json& j);
  void validate() const;
};

}  // namespace cpdit::models::text
