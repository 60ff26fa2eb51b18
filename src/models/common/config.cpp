#include <cpdit/core/error.hpp>
#include <cpdit/models/common/config.hpp>

namespace cpdit::models::common {

std::vector<nn::ConfigField> TransformerConfig::shared_fields() {
  return {{"num_attention_heads", num_attention_heads}, {"attention_head_dim", attention_head_dim},
          {"in_channels", in_channels}, {"out_channels", out_channels}, {"num_layers", num_layers}};
}

std::vector<nn::ConfigField> TransformerConfig::with_shared(std::initializer_list<nn::ConfigField> fields) {
  std::vector<nn::ConfigField> all = shared_fields();
  all.insert(all.end(), fields);
  return all;
}

void TransformerConfig::validate_shared(const std::string& model) const {
  nn::require_positive(model, {{"num_attention_heads", num_attention_heads},
                               {"attention_head_dim", attention_head_dim},
                               {"in_channels", in_channels}});
  CPDIT_CHECK(num_layers >= 0, invalid_argument, model, " config: num_layers must be >= 0, got ", num_layers);
}

}  // namespace cpdit::models::common
