#include "models/entries.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>

#include <filesystem>

namespace cpdit::models {

namespace {
const std::vector<ModelEntry>& entries() {
  // Qwen-Image before FLUX.1: both hold img_in.weight, only Qwen-Image a txt_norm.
  static const std::vector<ModelEntry> all = {qwenimage::registry_entry(),     flux::registry_entry(),
                                              wan::registry_entry(),           text::t5_registry_entry(),
                                              text::umt5_registry_entry(),     text::clip_text_registry_entry()};
  return all;
}

// The config.json that describes `path`: the one given, else the folder's own.
std::optional<std::string> config_file(const std::string& path, const std::optional<std::string>& config) {
  namespace fs = std::filesystem;
  if (config) return config;
  if (fs::is_directory(path) && fs::is_regular_file(fs::path(path) / "config.json"))
    return (fs::path(path) / "config.json").string();
  return std::nullopt;
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

std::optional<ModelClass> checkpoint_class(const std::string& path, const std::optional<std::string>& config) {
  if (auto file = config_file(path, config))
    if (auto named = class_in_config(*file)) return named;
  const io::Checkpoint checkpoint = io::Checkpoint::open(path);
  for (const ModelEntry& e : entries())
    if (e.recognises(checkpoint)) return ModelClass{e.class_name, "tensor names"};
  return std::nullopt;
}

LoadedModel open_model(const std::string& path, const std::optional<std::string>& config,
                       const nn::LoadOptions& load) {
  const std::optional<ModelClass> found = checkpoint_class(path, config);
  CPDIT_CHECK(found, unsupported, "cannot tell the model class of ", path,
              ": give a config.json with _class_name or architectures (known classes: ", known_classes(), ")");
  const ModelEntry& entry = model_entry(found->name);
  return entry.open(path, config, load);
}

}  // namespace cpdit::models
