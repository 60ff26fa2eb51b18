#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/models/qwenimage/checkpoint.hpp>
#include <cpdit/nn/key_layout.hpp>

#include <filesystem>

namespace cpdit::models::qwenimage {

QwenImageCheckpoint read_qwenimage_checkpoint(const std::string& path, const std::optional<std::string>& config_path) {
  QwenImageCheckpoint result;
  // Qwen-Image was released in diffusers' names: its GGUF conversions differ only by the prefix.
  result.state = nn::without_prefix(nn::read_state_dict(io::Checkpoint::open(path)));
  std::optional<std::string> config_file = config_path;
  namespace fs = std::filesystem;
  if (!config_file && fs::is_directory(path) && fs::exists(fs::path(path) / "config.json"))
    config_file = (fs::path(path) / "config.json").string();
  result.config = QwenImageConfig::infer(result.state);
  if (config_file) result.config = QwenImageConfig::from_json(io::read_json(*config_file), result.config);
  result.config.validate();
  return result;
}

std::unique_ptr<QwenImageTransformer2DModel> load_qwenimage(const QwenImageCheckpoint& checkpoint,
                                                            const nn::LoadOptions& options) {
  auto model = std::make_unique<QwenImageTransformer2DModel>(checkpoint.config);
  nn::load_state_dict(*model, checkpoint.state, options);
  return model;
}

}  // namespace cpdit::models::qwenimage
