#pragma once
// GGUF files (ggml's container, as llama.cpp, ComfyUI-GGUF and stable-diffusion.cpp write them): read
// through mmap with the whole header validated once (files are untrusted input), tensors handed out
// as zero-copy views of the mapping.
//
// File layout (little-endian, versions 2 and 3): "GGUF", u32 version, u64 tensor count, u64
// key-value count; the key-values (string key, u32 value type, value); per tensor: string name, u32
// dim count, u64 dims (fastest-varying first), u32 ggml type, u64 offset; then, at the next multiple
// of general.alignment (default 32), the data section, each tensor at its offset within it.
// A string is a u64 length and that many bytes.
#include <cpdit/core/weight.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace cpdit::io {

struct GgufTensorInfo {
  std::string name;
  std::string type;  // ggml's name: "F32", "F16", "BF16", "Q8_0", "Q4_K", ...
  Shape shape;       // PyTorch order (slowest-varying first): GGUF's dims reversed
  uint64_t offset = 0, nbytes = 0;  // in the data section
};

struct GgufMapping;  // the mapping plus the parsed header (src/io)

// One opened file; cheap to copy (copies share the mapping).
class GgufFile {
 public:
  // Validates the whole header; throws cpdit::Error (format or io) naming the file.
  static GgufFile open(const std::string& path);
  // The same checks over bytes already in memory (used by the fuzzer); `label` names them in errors.
  static GgufFile from_bytes(std::vector<std::byte> bytes, const std::string& label);

  const std::string& path() const;
  uint32_t version() const;
  // Every key-value, its value written out ("flux", "32", "[array of 3 u32]").
  const std::map<std::string, std::string>& metadata() const;
  std::vector<std::string> names() const;  // in data-offset order
  bool contains(const std::string& name) const;
  const GgufTensorInfo& info(const std::string& name) const;  // throws naming the missing tensor
  // F32 / F16 / BF16: a dense weight viewing the mapping. Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K,
  // Q6_K (2-D only): a block-quantised weight over the mapped blocks. Other types are refused
  // (unsupported), naming the tensor.
  Weight get(const std::string& name) const;

 private:
  std::shared_ptr<const GgufMapping> file_;
};

// True when `path` is a regular file that starts with GGUF's magic (the format is told by content,
// not name); anything else (a FIFO, a device) is left for the safetensors reader to refuse.
bool is_gguf_file(const std::string& path);

}  // namespace cpdit::io
