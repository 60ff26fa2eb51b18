#pragma once
// Safetensors files: read through mmap with the whole header validated (files are untrusted input),
// written atomically. A Checkpoint is one file, a sharded *.safetensors.index.json, or a folder
// holding one of those (the diffusers and transformers layouts).
//
// File layout: 8-byte little-endian header length N, N bytes of JSON
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}, then the
// data section; offsets are relative to its start.
#include <cpdit/core/tensor.hpp>
#include <cpdit/io/gguf.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cpdit::io {

struct TensorInfo {
  std::string name;
  std::string dtype;  // file dtype string, e.g. "BF16"
  Shape shape;
  uint64_t begin = 0, end = 0;  // byte offsets in the data section
};

struct MappedFile;  // the mapping plus the parsed header (src/io)

// One opened file; cheap to copy (copies share the mapping).
class SafetensorsFile {
 public:
  // Validates the whole header; throws cpdit::Error (format or io) naming the file and the tensor.
  static SafetensorsFile open(const std::string& path);
  // The same checks over bytes already in memory (used by the fuzzer); `label` names them in errors.
  static SafetensorsFile from_bytes(std::vector<std::byte> bytes, const std::string& label);

  const std::string& path() const;
  const std::map<std::string, std::string>& metadata() const;  // "__metadata__"
  std::vector<std::string> names() const;                        // in data-offset order
  bool contains(const std::string& name) const;
  const TensorInfo& info(const std::string& name) const;  // throws naming the missing tensor
  // F32/BF16/F16/I64/BOOL: a zero-copy view of the mapping when the data is aligned for its type
  // (safetensors does not promise alignment; a misaligned tensor is copied). F64, I32, I16, I8, U8,
  // F8_E4M3, F8_E5M2: converted on load (floats -> f32, integers -> i64).
  Tensor get(const std::string& name) const;
  // As get, but a 2-D F8_E4M3 / F8_E5M2 tensor stays 8-bit: its bytes, a view of the mapping, as a Weight
  // of one-value blocks (core/block_format.hpp) that Linear decodes a tile at a time.
  Weight weight(const std::string& name) const;

 private:
  std::shared_ptr<const MappedFile> file_;
};

std::map<std::string, Tensor> load_safetensors(const std::string& path);

// Writes atomically (temp file in the same folder, fsync, rename); a failure leaves any existing
// file untouched. Non-contiguous tensors are written contiguous.
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// A checkpoint: one .safetensors file, a *.safetensors.index.json (weight_map), a folder that
// io::resolve_model finds the weights of (io/model_files.hpp), or a GGUF file (told by its content).
class Checkpoint {
 public:
  static Checkpoint open(const std::string& path);
  std::vector<std::string> names() const;  // shard by shard, each in data-offset order
  bool contains(const std::string& name) const;
  // A GGUF tensor's info has its ggml type as dtype ("Q8_0") and its byte range in the data section.
  const TensorInfo& info(const std::string& name) const;
  Tensor get(const std::string& name) const;  // dense tensors only (a quantised one is refused)
  // Any tensor: dense, a GGUF's quantised blocks, or a safetensors FP8 matrix's codes.
  Weight weight(const std::string& name) const;
  const std::string& path() const { return path_; }  // what was opened
  const std::vector<SafetensorsFile>& shards() const { return shards_; }  // none for a GGUF file
  const std::optional<GgufFile>& gguf() const { return gguf_; }

 private:
  std::string path_;
  std::vector<SafetensorsFile> shards_;
  std::map<std::string, size_t> shard_of_;  // tensor name -> index in shards_
  std::optional<GgufFile> gguf_;
  std::map<std::string, TensorInfo> gguf_info_;
};

}  // namespace cpdit::io
