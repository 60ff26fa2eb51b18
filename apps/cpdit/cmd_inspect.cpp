// `cpdit inspect PATH`: what a checkpoint holds (the model class it resolves to and the config it is
// opened with; tensors with dtype, shape and size; metadata). PATH is a .safetensors file, a
// *.safetensors.index.json, or a folder holding one of those, a diffusers pipeline folder (its
// transformer), or a GGUF file (dtype: its ggml type, e.g. Q8_0); or a picture (.png, .jpg, .webp),
// whose settings (the "parameters" generate stores) are printed.
#include "command.hpp"
#include "progress.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/image.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/models/registry.hpp>
#include <cpdit/pipeline/picture_files.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
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

// A picture's text: the settings generate stored in "parameters" (or another tool's text chunks).
void inspect_picture(const std::string& path) {
  const cpdit::io::PictureText text = cpdit::io::read_picture_text(path);
  std::printf("%s: %zu text entr%s\n", path.c_str(), text.size(), text.size() == 1 ? "y" : "ies");
  for (const auto& [key, value] : text) std::printf("%s:\n%s\n", key.c_str(), value.c_str());
}

void inspect(const std::string& path) {
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
  cmd->add_option("path", *path, "file, index or folder")->required();
  cmd->callback([path] { inspect(*path); });
}

const bool registered = cpdit::app::register_command("inspect", add_inspect);

}  // namespace
