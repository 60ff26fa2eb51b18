#pragma once
// Element types and the bf16 / f16 <-> f32 conversions (round to nearest, ties to even).
#include <cstdint>
#include <cstring>
#include <string>

namespace cpdit {

enum class DType : uint8_t { f32, bf16, f16, i64, boolean };

size_t dtype_size(DType t);
const char* dtype_name(DType t);  // "f32", "bf16", "f16", "i64", "bool"

struct bf16 {
  uint16_t bits;
};
struct f16 {
  uint16_t bits;
};

inline float bf16_to_f32(bf16 x) {
  uint32_t u = uint32_t(x.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline bf16 f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{uint16_t((u >> 16) | 0x40)};  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{uint16_t(u >> 16)};
}

float f16_to_f32(f16 x);
f16 f32_to_f16(float f);
// The 8-bit floats of safetensors' F8_E4M3 (PyTorch's float8_e4m3fn: no infinities, S.1111.111 is
// NaN) and F8_E5M2 (the top byte of an IEEE half), exactly.
float f8_e4m3_to_f32(uint8_t code);
float f8_e5m2_to_f32(uint8_t code);

// Converts n elements of type `from` at src to type `to` at dst (no overlap).
void convert(const void* src, DType from, void* dst, DType to, size_t n);

}  // namespace cpdit
