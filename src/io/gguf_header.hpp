#pragma once
// Parsing and validation of a GGUF header. Files are untrusted: every check the format implies is made
// here, once, so that reading a tensor later cannot go out of bounds.
#include <cpdit/io/gguf.hpp>

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace cpdit::io {

struct GgufHeader {
  uint32_t version = 0;
  std::map<std::string, std::string> metadata;
  std::vector<GgufTensorInfo> tensors;     // sorted by data offset
  std::map<std::string, size_t> position;  // name -> index in tensors
  uint64_t alignment = 32;
  uint64_t data_start = 0;  // where the data section starts in the file
};

// `label` (the file path) starts every error message. Checks: the magic and a version of 2 or 3;
// every count, string and array bounded by the bytes left (so a hostile count cannot allocate or
// loop beyond the file's size); known value types, arrays nested at most kMaxArrayDepth deep; keys
// and tensor names unique; general.alignment a u32 power of two; 1 to 4 dims, each >= 1; known ggml
// types with the first dim a multiple of the block size; sizes overflow-checked; each offset a
// multiple of the alignment; the tensors tile the data section (each starts where the previous ends,
// rounded up to the alignment) and end inside the file.
GgufHeader parse_gguf_header(const std::string& label, const std::byte* bytes, size_t size);

}  // namespace cpdit::io
