#include "models/entries.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>

#include <atomic>

namespace cpdit::models {

namespace {
const std::vector<ModelEntry>& entries() {
  // Qwen-Image before FLUX.1: both hold img_in.weight, only Qwen-Image a txt_norm. SkyReels-V2 before
  // Wan: a SkyReels-V2 checkpoint with fps weights also has every Wan tensor name.
  static const std::vector<ModelEntry> all = {qwenimage::registry_entry(),
                                              flux::registry_entry(),
                                              skyreels_v2::registry_entry(),
                                              wan::registry_entry(),
                                              ltx_video::registry_entry(),
                                              text::t5_registry_entry(),
                                              text::umt5_registry_entry(),
                                              text::qwen2_5_vl_registry_entry(),
                                              text::clip_text_registry_entry(),
                                              text::clip_vision_registry_entry(false),
                                              text::clip_vision_registry_entry(true),
                                              vae::autoencoder_kl_registry_entry(),
                                              vae::autoencoder_kl_wan_registry_entry(),
                                              vae::autoencoder_kl_qwenimage_registry_entry(),
                                              vae::autoencoder_kl_ltx_registry_entry()};
  return all;
}

// diffusers writes the class as "_class_name"; transformers as the list "architectures".
std::optional<ModelClass> class_in_config(const std::string& file) {
  const nlohmann::json j = io::read_json(file);
  if (!j.is_object()) return std::nullopt;
  if (j.contains("_class_name") && j["_class_name"].is_string())
    return ModelClass{j["_class_name"].get<std::string>(), file + " _class_name"};
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string())
    return ModelClass{j["architectures"][0].get<std::string>(), file + " architectures"};
  return std::nullopt;
}
}  // namespace

std::string known_classes() {
  std::string names;
  for (const ModelEntry& e : entries()) names += (names.empty() ? "" : ", ") + e.class_name;
  return names;
}

const ModelEntry& model_entry(const std::string& class_name) {
  for (const ModelEntry& e : entries())
    if (e.class_name == class_name) return e;
  fail(ErrorKind::unsupported, "model class '", class_name, "' is not supported; known classes: ", known_classes());
}

std::optional<ModelClass> checkpoint_class(const io::ModelFiles& files) {
  if (files.config)
    if (auto named = class_in_config(*files.config)) return named;
  const io::Checkpoint checkpoint = io::Checkpoint::open(files.weights);
  for (const ModelEntry& e : entries())
    if (e.recognises(checkpoint)) return ModelClass{e.class_name, "tensor names"};
  return std::nullopt;
}

std::optional<nlohmann::json> checkpoint_config(const io::ModelFiles& files) {
  const std::optional<ModelClass> found = checkpoint_class(files);
  if (!found) return std::nullopt;
  for (const ModelEntry& e : entries())
    if (e.class_name == found->name && e.read_config) return e.read_config(files.weights, files.config);
  return std::nullopt;
}

std::string model_class(const std::string& path, const std::optional<std::string>& config,
                        const std::string& component) {
  // A config naming a class nobody registered is refused before the weights are sought.
  if (auto file = io::resolve_config(path, component, config))
    if (auto named = class_in_config(*file)) model_entry(named->name);
  const std::optional<ModelClass> found = checkpoint_class(io::resolve_model(path, component, config));
  CPDIT_CHECK(found, unsupported, "cannot tell the model class of ", path,
              ": give a config.json with _class_name or architectures (known classes: ", known_classes(), ")");
  model_entry(found->name);
  return found->name;
}

namespace {
std::atomic<int64_t> opened{0};
}

int64_t models_opened() { return opened.load(); }

LoadedModel open_model(const std::string& path, const std::optional<std::string>& config,
                       const nn::LoadOptions& load, const std::string& component) {
  const std::string name = model_class(path, config, component);
  const io::ModelFiles files = io::resolve_model(path, component, config);
  ++opened;
  return model_entry(name).open(files.weights, files.config, load);
}

}  // namespace cpdit::models
