#include "file_dtype.hpp"

#include <cpdit/core/error.hpp>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>

namespace cpdit::io {

namespace {

constexpr FileDType kFileDTypes[] = {
    {"F32", 4, LoadAs::native, DType::f32},
    {"BF16", 2, LoadAs::native, DType::bf16},
    {"F16", 2, LoadAs::native, DType::f16},
    {"I64", 8, LoadAs::native, DType::i64},
    {"BOOL", 1, LoadAs::native, DType::boolean},
    {"F64", 8, LoadAs::f32, DType::f32},
    {"F8_E4M3", 1, LoadAs::f32, DType::f32},
    {"F8_E5M2", 1, LoadAs::f32, DType::f32},
    {"I32", 4, LoadAs::i64, DType::i64},
    {"I16", 2, LoadAs::i64, DType::i64},
    {"I8", 1, LoadAs::i64, DType::i64},
    {"U8", 1, LoadAs::i64, DType::i64},
    {"U16", 2, LoadAs::unsupported, DType::i64},
    {"U32", 4, LoadAs::unsupported, DType::i64},
    {"U64", 8, LoadAs::unsupported, DType::i64},
    {"C64", 8, LoadAs::unsupported, DType::f32},
    {"F8_E8M0", 1, LoadAs::unsupported, DType::f32},
    {"F8_E4M3FNUZ", 1, LoadAs::unsupported, DType::f32},
    {"F8_E5M2FNUZ", 1, LoadAs::unsupported, DType::f32},
};

template <class T>
T read_unaligned(const std::byte* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

}  // namespace

const FileDType* find_file_dtype(std::string_view name) {
  for (const FileDType& d : kFileDTypes)
    if (d.name == name) return &d;
  return nullptr;
}

std::string_view file_dtype_name(DType dtype) {
  for (const FileDType& d : kFileDTypes)
    if (d.load == LoadAs::native && d.native == dtype) return d.name;
  fail(ErrorKind::internal, "no safetensors name for dtype ", dtype_name(dtype));
}

int file_dtype_rank(DType dtype) {
  switch (dtype) {
    case DType::i64: return 0;
    case DType::f32: return 1;
    case DType::bf16: return 2;
    case DType::f16: return 3;
    case DType::boolean: return 4;
  }
  return 5;
}


void decode_to_f32(const FileDType& from, const std::byte* src, float* dst, size_t n) {
  if (from.name == "F64") {
    for (size_t i = 0; i < n; ++i) dst[i] = float(read_unaligned<double>(src + 8 * i));
    return;
  }
  CPDIT_CHECK(from.name == "F8_E4M3" || from.name == "F8_E5M2", internal, "no f32 decoder for ",
              from.name);
  std::array<float, 256> table;
  for (int code = 0; code < 256; ++code)
    table[code] = from.name == "F8_E4M3" ? f8_e4m3_to_f32(uint8_t(code)) : f8_e5m2_to_f32(uint8_t(code));
  for (size_t i = 0; i < n; ++i) dst[i] = table[uint8_t(src[i])];
}

void decode_to_i64(const FileDType& from, const std::byte* src, int64_t* dst, size_t n) {
  auto decode = [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < n; ++i) dst[i] = int64_t(read_unaligned<T>(src + sizeof(T) * i));
  };
  if (from.name == "I32") return decode(int32_t{});
  if (from.name == "I16") return decode(int16_t{});
  if (from.name == "I8") return decode(int8_t{});
  if (from.name == "U8") return decode(uint8_t{});
  fail(ErrorKind::internal, "no i64 decoder for ", from.name);
}

}  // namespace cpdit::io
