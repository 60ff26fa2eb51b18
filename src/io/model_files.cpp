#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/io/model_files.hpp>

#include <filesystem>

namespace cpdit::io {

namespace fs = std::filesystem;

namespace {

// The weight files a model folder may hold, in the order diffusers and transformers look for them.
constexpr const char* kWeightFiles[] = {"diffusion_pytorch_model.safetensors",
                                        "diffusion_pytorch_model.safetensors.index.json", "model.safetensors",
                                        "model.safetensors.index.json"};

bool is_pipeline_folder(const fs::path& path) {
  return fs::is_directory(path) && fs::is_regular_file(path / "model_index.json");
}

// The components model_index.json lists: every key but diffusers' own "_class_name" and the like.
std::string listed_components(const fs::path& index) {
  const nlohmann::json j = read_json(index.string());
  std::string names;
  if (j.is_object())
    for (const auto& [key, value] : j.items())
      if (!key.starts_with("_")) names += (names.empty() ? "" : ", ") + key;
  return names.empty() ? "none" : names;
}

// The model's own location: the component's folder of a pipeline folder, else `path` itself.
fs::path model_location(const std::string& path, const std::string& component) {
  CPDIT_CHECK(fs::exists(path), io, path, " does not exist");
  if (!is_pipeline_folder(path)) return path;
  const fs::path folder = fs::path(path) / component;
  CPDIT_CHECK(fs::is_directory(folder), io, path, " is a diffusers pipeline with no '", component,
              "' folder (its components: ", listed_components(fs::path(path) / "model_index.json"), ")");
  return folder;
}

// The weights of a model location: the file itself, or what its folder holds.
std::string weights_at(const fs::path& location) {
  if (!fs::is_directory(location)) return location.string();
  for (const char* name : kWeightFiles)
    if (fs::is_regular_file(location / name)) return (location / name).string();
  fail(ErrorKind::io, location.string(), " holds no model: looked for model_index.json (a diffusers pipeline), ",
       "diffusion_pytorch_model.safetensors[.index.json] and model.safetensors[.index.json]");
}

}  // namespace

std::optional<std::string> pipeline_component(const std::string& path, const std::string& component) {
  if (!is_pipeline_folder(path) || !fs::is_directory(fs::path(path) / component)) return std::nullopt;
  return (fs::path(path) / component).string();
}

std::optional<std::string> resolve_config(const std::string& path, const std::string& component,
                                          const std::optional<std::string>& config) {
  if (config) return config;
  const fs::path location = model_location(path, component);
  const fs::path folder = fs::is_directory(location) ? location : location.parent_path();
  const fs::path file = (folder.empty() ? fs::path(".") : folder) / "config.json";
  if (fs::is_regular_file(file)) return file.string();
  return std::nullopt;
}

ModelFiles resolve_model(const std::string& path, const std::string& component,
                         const std::optional<std::string>& config) {
  return {weights_at(model_location(path, component)), resolve_config(path, component, config)};
}

}  // namespace cpdit::io
