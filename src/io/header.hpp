#pragma once
// Parsing and validation of a safetensors header. Files are untrusted: every check the format
// implies is made here, once, so that reading a tensor later cannot go out of bounds.
#include <cpdit/io/safetensors.hpp>

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace cpdit::io {

// Header lengths above this are rejected (as the reference reader does).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct Header {
  std::vector<TensorInfo> tensors;        // sorted by data offset
  std::map<std::string, size_t> position;  // name -> index in tensors
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // 8 + header length: where the data section starts in the file
};

// `label` (the file path) starts every error message. Checks: size >= 8; header length <= the
// limit and inside the file; the header is a JSON object of {dtype, shape, data_offsets} entries
// plus an optional "__metadata__" of strings; no duplicate names; known dtypes; dims non-negative
// integers; numel * element size (overflow-checked) == end - begin; the ranges tile the data section
// exactly (no gaps, overlaps, or trailing bytes).
Header parse_header(const std::string& label, const std::byte* bytes, size_t size);

}  // namespace cpdit::io
