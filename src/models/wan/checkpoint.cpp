#include <cpdit/models/wan/checkpoint.hpp>
#include <cpdit/nn/config_inference.hpp>

namespace cpdit::models::wan {

WanCheckpoint read_wan_checkpoint(const std::string& path, const std::optional<std::string>& config_path) {
  return nn::read_transformer_checkpoint<WanCheckpoint>(path, config_path);
}

std::unique_ptr<WanTransformer3DModel> load_wan(const WanCheckpoint& checkpoint, const nn::LoadOptions& options) {
  return nn::load_model<WanTransformer3DModel>(checkpoint, options);
}

}  // namespace cpdit::models::wan
