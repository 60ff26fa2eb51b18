#pragma once
// The hyper-parameters every diffusers transformer config names alike (config.json keys). A family's
// config derives from it, sets its own defaults and adds its own fields.
#include <cpdit/nn/config_inference.hpp>

#include <initializer_list>
#include <string>
#include <vector>

namespace cpdit::models::common {

struct TransformerConfig {
  int64_t num_attention_heads = 0;
  int64_t attention_head_dim = 0;
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  int64_t num_layers = 0;

  int64_t inner_dim() const { return num_attention_heads * attention_head_dim; }

  // These fields, for nn::read_config_fields; with_shared: these, then a family's own `fields`.
  std::vector<nn::ConfigField> shared_fields();
  std::vector<nn::ConfigField> with_shared(std::initializer_list<nn::ConfigField> fields);
  // Heads, head dim and input channels positive, a layer count >= 0; else an Error naming `model`'s
  // config and the field. (out_channels is the family's to check: some read 0 as "as in_channels".)
  void validate_shared(const std::string& model) const;
};

// A family's config from its diffusers config.json over `base` (its defaults, or what the weights
// showed): every field the family's `fields()` lists, bad values a one-line Error naming `model`.
template <class Config>
Config read_family_config(const nlohmann::json& j, Config base, const std::string& model) {
  nn::read_config_fields(j, model, base.fields());
  return base;
}

}  // namespace cpdit::models::common
