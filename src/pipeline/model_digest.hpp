#pragma once
// What identifies a model on disk for the check that every MPI process runs the same one: each
// config's bytes and each weight file's size and header, not its tensor data (reading that would
// cost as long as loading it).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cpdit::pipeline {

// FNV-1a, 64-bit: a digest to compare, not a defence against a forged file.
struct Fnv1a {
  uint64_t value = 14695981039346656037ull;
  void add(std::string_view bytes);
  template <class T>
  void add_value(const T& v) {
    add(std::string_view(reinterpret_cast<const char*>(&v), sizeof v));
  }
};

struct FileDigest {
  std::string name;  // the path as given, then the file's place under it
  uint64_t digest = 0;
};

// The model files under each path (a pipeline or model folder, or a weights file with the config
// beside it; empty paths are skipped), sorted by name: *.json whole; *.safetensors and *.gguf their
// size and their header as io validates it (metadata, tensor names, types, shapes and offsets). A
// pipeline folder's tokenizer*/, text_encoder*/, image_encoder/ and image_processor/ are left out: only
// rank 0 reads them (generate's encode stage, its image-to-video image encode). A file that cannot be read has the digest of the reason, so a rank that cannot read
// what the others read differs from them.
std::vector<FileDigest> model_file_digests(const std::vector<std::string>& paths);

}  // namespace cpdit::pipeline
