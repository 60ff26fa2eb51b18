#pragma once
// The dtype strings of the safetensors format, their element sizes, and how cpdit loads each.
#include <cpdit/core/dtype.hpp>

#include <cstddef>
#include <string_view>

namespace cpdit::io {

enum class LoadAs {
  native,       // same bytes as a cpdit dtype: zero-copy view
  f32,          // converted to f32 (F64, F8_*)
  i64,          // converted to i64 (narrower integers)
  unsupported,  // valid in the format, but cpdit cannot use it
};

struct FileDType {
  std::string_view name;  // as in the file, e.g. "BF16"
  size_t size;            // bytes per element
  LoadAs load;
  DType native;           // the cpdit dtype when load == native
};

// nullptr for a string the format does not define (or a sub-byte type, which cpdit cannot size).
const FileDType* find_file_dtype(std::string_view name);
// The file dtype string cpdit writes for a dtype ("F32", "BF16", "F16", "I64", "BOOL").
std::string_view file_dtype_name(DType dtype);
// Writer order: larger elements first, BF16 before F16, as the reference writer does.
int file_dtype_rank(DType dtype);

// Converts n elements at src (any alignment) of a LoadAs::f32 / LoadAs::i64 dtype.
void decode_to_f32(const FileDType& from, const std::byte* src, float* dst, size_t n);
void decode_to_i64(const FileDType& from, const std::byte* src, int64_t* dst, size_t n);

}  // namespace cpdit::io
