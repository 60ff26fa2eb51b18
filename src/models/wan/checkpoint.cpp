#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/models/wan/checkpoint.hpp>

#include <filesystem>

namespace cpdit::models::wan {

WanCheckpoint read_wan_checkpoint(const std::string& path, const std::optional<std::string>& config_path) {
  WanCheckpoint result;
  result.state = nn::read_state_dict(io::Checkpoint::open(path));
  std::optional<std::string> config_file = config_path;
  namespace fs = std::filesystem;
  if (!config_file && fs::is_directory(path) && fs::exists(fs::path(path) / "config.json"))
    config_file = (fs::path(path) / "config.json").string();
  if (!config_file) {
    result.config = WanConfig::infer(result.state);
  } else {
    WanConfig base;
    try {
      base = WanConfig::infer(result.state);
    } catch (const Error&) {
      // The config file names everything; the loader reports how the weights differ from it.
    }
    result.config = WanConfig::from_json(io::read_json(*config_file), base);
  }
  result.config.validate();
  return result;
}

std::unique_ptr<WanTransformer3DModel> load_wan(const WanCheckpoint& checkpoint, const nn::LoadOptions& options) {
  auto model = std::make_unique<WanTransformer3DModel>(checkpoint.config);
  nn::load_state_dict(*model, checkpoint.state, options);
  return model;
}

}  // namespace cpdit::models::wan
