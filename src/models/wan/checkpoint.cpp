#include <cpdit/core/error.hpp>
#include <cpdit/io/model_files.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/models/wan/checkpoint.hpp>
#include <cpdit/nn/config_inference.hpp>

namespace cpdit::models::wan {

WanCheckpoint read_wan_checkpoint(const std::string& path, const std::optional<std::string>& config_path) {
  const io::ModelFiles files = io::resolve_model(path, "transformer", config_path);
  WanCheckpoint result;
  result.state = nn::read_state_dict(io::Checkpoint::open(files.weights));
  result.config = nn::read_config<WanConfig>(result.state, files.config);
  return result;
}

std::unique_ptr<WanTransformer3DModel> load_wan(const WanCheckpoint& checkpoint, const nn::LoadOptions& options) {
  auto model = std::make_unique<WanTransformer3DModel>(checkpoint.config);
  nn::load_state_dict(*model, checkpoint.state, options);
  return model;
}

}  // namespace cpdit::models::wan
