#include "pipeline/model_digest.hpp"

#include <cpdit/io/gguf.hpp>
#include <cpdit/io/model_files.hpp>
#include <cpdit/io/safetensors.hpp>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace cpdit::pipeline {

namespace fs = std::filesystem;

void Fnv1a::add(std::string_view bytes) {
  for (char c : bytes) value = (value ^ static_cast<unsigned char>(c)) * 1099511628211ull;
}

namespace {

std::string read_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + file.string());
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A string with its length first, so that consecutive fields cannot run into each other.
void add_text(Fnv1a& hash, std::string_view text) {
  hash.add_value(uint64_t(text.size()));
  hash.add(text);
}

void add_shape(Fnv1a& hash, const Shape& shape) {
  hash.add_value(uint64_t(shape.size()));
  for (int64_t d : shape) hash.add_value(d);
}

// The header as io parsed and validated it (bounded by the file, whatever its length field says):
// every metadata entry, then every tensor's name and what `add_tensor` takes of its info.
template <class File, class AddTensor>
void add_header(Fnv1a& hash, const File& file, AddTensor add_tensor) {
  for (const auto& [key, value] : file.metadata()) {
    add_text(hash, key);
    add_text(hash, value);
  }
  for (const std::string& name : file.names()) {
    add_text(hash, name);
    add_tensor(file.info(name));
  }
}

void add_weights_header(Fnv1a& hash, const fs::path& file) {
  if (io::is_gguf_file(file.string())) {
    const io::GgufFile gguf = io::GgufFile::open(file.string());
    hash.add_value(gguf.version());
    add_header(hash, gguf, [&hash](const io::GgufTensorInfo& t) {
      add_text(hash, t.type);
      add_shape(hash, t.shape);
      hash.add_value(t.offset);
      hash.add_value(t.nbytes);
    });
    return;
  }
  add_header(hash, io::SafetensorsFile::open(file.string()), [&hash](const io::TensorInfo& t) {
    add_text(hash, t.dtype);
    add_shape(hash, t.shape);
    hash.add_value(t.begin);
    hash.add_value(t.end);
  });
}

uint64_t file_digest(const fs::path& file) {
  Fnv1a hash;
  try {
    hash.add_value(uint64_t(fs::file_size(file)));
    if (file.extension() == ".json") hash.add(read_file(file));
    else add_weights_header(hash, file);
  } catch (const std::exception& e) {
    Fnv1a reason;
    reason.add(e.what());
    return reason.value;
  }
  return hash.value;
}

bool model_file(const fs::path& file) {
  const std::string extension = file.extension().string();
  return extension == ".json" || extension == ".safetensors" || extension == ".gguf";
}

// Read by rank 0 alone: the prompt's encoders (the encode stage) and the image encoder (image-to-video).
bool rank0_component(const fs::path& relative) {
  const std::string top = relative.begin()->string();
  return top.rfind("tokenizer", 0) == 0 || top.rfind("text_encoder", 0) == 0 || top == "image_encoder" ||
         top == "image_processor";
}

void add_path(std::vector<FileDigest>& out, const std::string& path) {
  const fs::path root(path);
  std::error_code error;
  if (fs::is_directory(root, error)) {
    std::vector<FileDigest> found;
    for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied, error);
         !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
      const fs::path relative = fs::relative(it->path(), root, error);
      // A pipeline folder's files lie one component folder deep, at most.
      if (it->is_directory() && (it.depth() >= 1 || rank0_component(relative))) it.disable_recursion_pending();
      if (rank0_component(relative)) continue;
      if (it->is_regular_file() && model_file(it->path()))
        found.push_back({(root / relative).string(), file_digest(it->path())});
    }
    std::sort(found.begin(), found.end(), [](const FileDigest& a, const FileDigest& b) { return a.name < b.name; });
    out.insert(out.end(), found.begin(), found.end());
    return;
  }
  out.push_back({path, file_digest(root)});  // a missing file digests its reason
  // A single weights file reads the config.json beside it.
  try {
    if (const std::optional<std::string> config = io::resolve_config(path); config && *config != path)
      out.push_back({*config, file_digest(*config)});
  } catch (const std::exception&) {
    // No config to find: the model loader says so on every rank.
  }
}

}  // namespace

std::vector<FileDigest> model_file_digests(const std::vector<std::string>& paths) {
  std::vector<FileDigest> out;
  for (const std::string& path : paths)
    if (!path.empty()) add_path(out, path);
  return out;
}

}  // namespace cpdit::pipeline
