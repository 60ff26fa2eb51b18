// `cpdit inspect PATH`: what a checkpoint holds (the model class it resolves to and the config it is
// opened with; tensors with dtype, shape and size; metadata). PATH is a .safetensors file, a
// *.safetensors.index.json, or a folder holding one of those, a diffusers pipeline folder (its
// transformer), or a GGUF file (dtype: its ggml type, e.g. Q8_0); or a picture (.png, .jpg, .webp),
// whose settings (the "parameters" generate stores) are printed. A LoRA file says its layout too.
#include "command.hpp"
#include "progress.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/image.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/models/registry.hpp>
#include <cpdit/nn/lora.hpp>
#include <cpdit/pipeline/picture_files.hpp>
#include <cpdit/pipeline/presets.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

namespace {

// The config the model would be opened with: config.json over what the tensors tell, or the tensors
// alone (a GGUF or single file without one: the built-in config sized by the tensor shapes). One
// the tensors cannot size is said, not fatal: the listing is still wanted.
void print_config(const cpdit::io::ModelFiles& files) {
  try {
    if (auto config = cpdit::models::checkpoint_config(files))
      std::printf("config (%s): %s\n", files.config ? ("from " + *files.config).c_str() : "from the tensor shapes",
                  config->dump().c_str());
  } catch (const cpdit::Error& e) {
    std::printf("config: not told (%s); forward and generate take one with --config\n", e.what());
  }
}

// A LoRA file (its tensor names say lora: lora_A, lora_down, XLabs' qkv_lora1): its layout, modules,
// ranks and scales, as generate --lora reads it; a file it would refuse is said, not fatal.
// With a model (--model, --preset): how its modules meet that model's layers.
struct LoraTarget {
  std::string model, preset;
};

void print_lora_match(const cpdit::nn::LoraFile& file, const LoraTarget& target) {
  const cpdit::models::LoadedModel model =
      target.preset.empty() ? cpdit::models::open_model(target.model, std::nullopt, {})
                            : cpdit::pipeline::preset_model(target.preset, 0, {});
  const std::string name = target.preset.empty() ? target.model : "preset " + target.preset;
  const cpdit::nn::LoraMatch match = cpdit::nn::match_lora(*model.replica(), file, model.original_names);
  size_t layers = 0;
  for (const auto& [module, paths] : match.layers) layers += paths.size();
  std::printf("lora on %s (%s): %zu of %zu modules match %zu layers", name.c_str(), model.class_name.c_str(),
              match.layers.size(), file.modules.size(), layers);
  if (!match.layers.empty()) {
    const auto& [module, paths] = *match.layers.begin();
    std::printf(" (e.g. %s -> %s%s)", module.c_str(), paths.front().c_str(), paths.size() > 1 ? ", ..." : "");
  }
  std::printf("\n");
  for (size_t i = 0; i < match.unmatched.size() && i < 3; ++i)
    std::printf("  names no layer: %s\n", match.unmatched[i].c_str());
  if (match.unmatched.size() > 3) std::printf("  ... and %zu more\n", match.unmatched.size() - 3);
}

void print_lora(const std::string& path, const std::vector<std::string>& names, const LoraTarget& target) {
  const bool lora =
      std::any_of(names.begin(), names.end(), [](const std::string& n) { return n.find("lora") != std::string::npos; });
  CPDIT_CHECK(lora || (target.model.empty() && target.preset.empty()), invalid_argument, "inspect: ", path,
              " is no LoRA file, so --model and --preset have nothing to match");
  if (!lora) return;
  std::optional<cpdit::nn::LoraFile> file;
  try {
    file = cpdit::nn::read_lora(path);
  } catch (const cpdit::Error& e) {
    std::printf("lora: generate --lora would refuse it (%s)\n", e.what());
    return;
  }
  int64_t low = INT64_MAX, high = 0;
  double scale_low = INFINITY, scale_high = 0;
  for (const cpdit::nn::LoraModule& m : file->modules) {
    low = std::min(low, m.down.size(0)), high = std::max(high, m.down.size(0));
    scale_low = std::min(scale_low, m.scale), scale_high = std::max(scale_high, m.scale);
  }
  const std::string ranks = low == high ? std::to_string(low) : std::to_string(low) + " to " + std::to_string(high);
  char scales[64];
  std::snprintf(scales, sizeof scales, scale_low == scale_high ? "%g" : "%g to %g", scale_low, scale_high);
  std::printf("lora: %s, %zu modules (e.g. %s), rank %s, alpha/rank %s\n", file->layout.c_str(), file->modules.size(),
              file->modules.front().name.c_str(), ranks.c_str(), scales);
  if (!target.model.empty() || !target.preset.empty()) print_lora_match(*file, target);
}

// A picture's text: the settings generate stored in "parameters" (or another tool's text chunks).
void inspect_picture(const std::string& path) {
  const cpdit::io::PictureText text = cpdit::io::read_picture_text(path);
  std::printf("%s: %zu text entr%s\n", path.c_str(), text.size(), text.size() == 1 ? "y" : "ies");
  for (const auto& [key, value] : text) std::printf("%s:\n%s\n", key.c_str(), value.c_str());
}

void inspect(const std::string& path, const LoraTarget& target) {
  CPDIT_CHECK(target.model.empty() || target.preset.empty(), invalid_argument,
              "inspect: give --model or --preset, not both");
  if (cpdit::pipeline::is_picture_name(path)) return inspect_picture(path);
  cpdit::io::Checkpoint checkpoint = cpdit::io::Checkpoint::open(path);
  std::vector<std::string> names = checkpoint.names();
  size_t name_width = 4, shape_width = 5;
  uint64_t total = 0;
  for (const std::string& name : names) {
    const cpdit::io::TensorInfo& info = checkpoint.info(name);
    name_width = std::max(name_width, name.size());
    shape_width = std::max(shape_width, cpdit::shape_string(info.shape).size());
    total += info.end - info.begin;
  }
  const size_t files = checkpoint.gguf() ? 1 : checkpoint.shards().size();
  std::printf("%s: %zu tensors, %s in %zu file%s\n", path.c_str(), names.size(),
              cpdit::app::format_bytes(total).c_str(), files, files == 1 ? "" : "s");
  print_lora(path, names, target);
  // The class the model registry would open it as (a class it does not know is still named).
  const cpdit::io::ModelFiles model_files = cpdit::io::resolve_model(path);
  if (auto model = cpdit::models::checkpoint_class(model_files)) {
    std::printf("class: %s (from %s)\n", model->name.c_str(), model->told_by.c_str());
    print_config(model_files);
  } else {
    std::printf("class: not told by a config.json or the tensor names (known: %s)\n",
                cpdit::models::known_classes().c_str());
  }
  if (const auto& gguf = checkpoint.gguf()) {
    std::printf("metadata (GGUF version %u):\n", gguf->version());
    for (const auto& [key, value] : gguf->metadata()) std::printf("  %s = %s\n", key.c_str(), value.c_str());
  }
  bool sharded = checkpoint.shards().size() > 1;
  for (const cpdit::io::SafetensorsFile& shard : checkpoint.shards()) {
    if (shard.metadata().empty()) continue;
    std::string file = std::filesystem::path(shard.path()).filename().string();
    std::printf(sharded ? "metadata of %s:\n" : "metadata:\n", file.c_str());
    for (const auto& [key, value] : shard.metadata()) std::printf("  %s = %s\n", key.c_str(), value.c_str());
  }
  std::printf("%-*s  %-7s  %-*s  %s\n", int(name_width), "name", "dtype", int(shape_width), "shape", "bytes");
  for (const std::string& name : names) {
    const cpdit::io::TensorInfo& info = checkpoint.info(name);
    std::printf("%-*s  %-7s  %-*s  %llu\n", int(name_width), name.c_str(), info.dtype.c_str(), int(shape_width),
                cpdit::shape_string(info.shape).c_str(), static_cast<unsigned long long>(info.end - info.begin));
  }
}

void add_inspect(CLI::App& parent) {
  CLI::App* cmd = parent.add_subcommand(
      "inspect", "Print the model class and the config it is opened with, and list the tensors (name, dtype, "
                 "shape, bytes) and metadata of a .safetensors file, a *.safetensors.index.json, a model folder, a "
                 "diffusers pipeline folder (its transformer) or a GGUF file; or the settings a picture carries "
                 "(a PNG's text chunks, a JPEG's or WebP's EXIF UserComment, as generate and A1111 write them)");
  auto path = std::make_shared<std::string>();
  auto target = std::make_shared<LoraTarget>();
  cmd->add_option("path", *path, "file, index or folder")->required();
  cmd->add_option("-m,--model", target->model,
                  "for a LoRA file: the model (folder or file) whose layers its modules are matched to");
  cmd->add_option("--preset", target->preset, "for a LoRA file: the preset whose layers its modules are matched to");
  cmd->callback([path, target] { inspect(*path, *target); });
}

const bool registered = cpdit::app::register_command("inspect", add_inspect);

}  // namespace
