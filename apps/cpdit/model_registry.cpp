#include "model_registry.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>

#include <filesystem>
#include <vector>

namespace cpdit::app {

namespace {
std::vector<TransformerKind>& kinds() {
  static std::vector<TransformerKind> all;
  return all;
}

std::string known_classes() {
  std::string names;
  for (const auto& k : kinds()) names += (names.empty() ? "" : ", ") + k.class_name;
  return names;
}

std::optional<std::string> class_name_in(const std::string& path, const std::optional<std::string>& config) {
  namespace fs = std::filesystem;
  std::optional<std::string> file = config;
  if (!file && fs::is_directory(path) && fs::exists(fs::path(path) / "config.json"))
    file = (fs::path(path) / "config.json").string();
  if (!file) return std::nullopt;
  const nlohmann::json j = io::read_json(*file);
  if (!j.is_object() || !j.contains("_class_name") || !j["_class_name"].is_string()) return std::nullopt;
  return j["_class_name"].get<std::string>();
}
}  // namespace

bool register_transformer(TransformerKind kind) {
  kinds().push_back(std::move(kind));
  return true;
}

LoadedTransformer open_transformer(const std::string& path, const std::optional<std::string>& config,
                                   const nn::LoadOptions& load) {
  if (auto name = class_name_in(path, config)) {
    for (const auto& k : kinds())
      if (k.class_name == *name) return k.open(path, config, load);
    fail(ErrorKind::unsupported, "model class '", *name, "' (config _class_name) is not supported; known: ",
         known_classes());
  }
  const io::Checkpoint checkpoint = io::Checkpoint::open(path);
  for (const auto& k : kinds())
    if (k.recognises(checkpoint)) return k.open(path, config, load);
  fail(ErrorKind::unsupported, "cannot tell the model class of ", path,
       ": give a config.json with _class_name (known: ", known_classes(), ")");
}

}  // namespace cpdit::app
