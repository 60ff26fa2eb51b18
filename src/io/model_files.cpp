#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/io/model_files.hpp>

#include <filesystem>

namespace cpdit::io {

namespace fs = std::filesystem;

namespace {

// The weight files a model folder may hold, in the order diffusers and transformers look for them.
constexpr const char* kWeightFiles[] = {"diffusion_pytorch_model.safetensors", "diffusion_pytorch_model.safetensors.index.json",
                                        "model.safetensors", "model.safetensors.index.json"};

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

std::optional<std::string> config_in(const fs::path& folder) {
  if (fs::is_regular_file(folder / "config.json")) return (folder / "config.json").string();
  return std::nullopt;
}

ModelFiles model_folder(const fs::path& folder) {
  for (const char* name : kWeightFiles)
    if (fs::is_regular_file(folder / name)) return {(folder / name).string(), config_in(folder)};
  fail(ErrorKind::io, folder.string(), " holds no model: looked for model_index.json (a diffusers pipeline), ",
       "diffusion_pytorch_model.safetensors[.index.json] and model.safetensors[.index.json]");
}

}  // namespace

std::optional<std::string> pipeline_component(const std::string& path, const std::string& component) {
  if (!is_pipeline_folder(path) || !fs::is_directory(fs::path(path) / component)) return std::nullopt;
  return (fs::path(path) / component).string();
}

ModelFiles resolve_model(const std::string& path, const std::string& component, const std::optional<std::string>& config) {
  CPDIT_CHECK(fs::exists(path), io, path, " does not exist");
  ModelFiles files;
  if (is_pipeline_folder(path)) {
    const std::optional<std::string> folder = pipeline_component(path, component);
    CPDIT_CHECK(folder, io, path, " is a diffusers pipeline with no '", component, "' folder (its components: ",
                listed_components(fs::path(path) / "model_index.json"), ")");
    files = model_folder(*folder);
  } else if (fs::is_directory(path)) {
    files = model_folder(path);
  } else {
    const fs::path parent = fs::path(path).parent_path();
    files = {path, config_in(parent.empty() ? fs::path(".") : parent)};
  }
  if (config) files.config = config;
  return files;
}

}  // namespace cpdit::io
