#include <cpdit/core/dtype.hpp>
#include <cpdit/core/error.hpp>

#include <cmath>
#include <limits>

namespace cpdit {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::bf16: return 2;
    case DType::f16: return 2;
    case DType::i64: return 8;
    case DType::boolean: return 1;
  }
  fail(ErrorKind::internal, "unknown dtype");
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::i64: return "i64";
    case DType::boolean: return "bool";
  }
  return "?";
}

float f8_e4m3_to_f32(uint8_t code) {
  int exponent = (code >> 3) & 0xf, mantissa = code & 0x7;
  float sign = (code & 0x80) ? -1.0f : 1.0f;
  if (exponent == 0xf && mantissa == 0x7) return std::numeric_limits<float>::quiet_NaN();
  if (exponent == 0) return sign * std::ldexp(float(mantissa), -6 - 3);  // subnormal
  return sign * std::ldexp(float(8 + mantissa), exponent - 7 - 3);
}

float f8_e5m2_to_f32(uint8_t code) {
  // E5M2 is the top byte of an IEEE half: same sign, exponent width and bias.
  return f16_to_f32(f16{uint16_t(code << 8)});
}

float f16_to_f32(f16 x) {
  uint32_t sign = uint32_t(x.bits & 0x8000u) << 16;
  uint32_t exp = (x.bits >> 10) & 0x1fu;
  uint32_t man = x.bits & 0x3ffu;
  uint32_t u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man << 13);  // inf / nan
  } else if (exp != 0) {
    u = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    u = sign;
  } else {  // subnormal: value = man * 2^-24
    float f = std::ldexp(float(man), -24);
    std::memcpy(&u, &f, 4);
    u |= sign;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

f16 f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return f16{uint16_t(sign | 0x7e00u)};  // nan
  if (abs >= 0x477ff000u) return f16{uint16_t(sign | 0x7c00u)};  // rounds to inf
  if (abs < 0x38800000u) {
    // Result is subnormal (or zero) in f16: units of 2^-24, rounded to nearest even by the FPU.
    float a;
    std::memcpy(&a, &abs, 4);
    float scaled = a * 16777216.0f;  // exact: a power-of-two scale
    return f16{uint16_t(sign | uint16_t(std::nearbyint(scaled)))};
  }
  // Normal: rebias the exponent, round the 13 dropped mantissa bits to nearest even.
  uint32_t rebased = abs - (112u << 23);
  rebased += 0xfffu + ((rebased >> 13) & 1u);
  return f16{uint16_t(sign | (rebased >> 13))};
}

namespace {
template <class From>
float load(const void* p, size_t i) {
  const From* s = static_cast<const From*>(p);
  if constexpr (std::is_same_v<From, bf16>) return bf16_to_f32(s[i]);
  else if constexpr (std::is_same_v<From, f16>) return f16_to_f32(s[i]);
  else return float(s[i]);
}

template <class From, class To>
void convert_typed(const void* src, void* dst, size_t n) {
  To* d = static_cast<To*>(dst);
  const From* s = static_cast<const From*>(src);
  for (size_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<From, To>) {
      d[i] = s[i];
    } else if constexpr (std::is_same_v<From, int64_t> && std::is_same_v<To, bool>) {
      d[i] = s[i] != 0;
    } else if constexpr (std::is_same_v<To, int64_t> || std::is_same_v<To, bool>) {
      float v = load<From>(src, i);
      if constexpr (std::is_same_v<To, bool>) d[i] = v != 0.0f;
      else d[i] = int64_t(v);
    } else if constexpr (std::is_same_v<From, int64_t> || std::is_same_v<From, bool>) {
      float v = float(s[i]);
      if constexpr (std::is_same_v<To, float>) d[i] = v;
      else if constexpr (std::is_same_v<To, bf16>) d[i] = f32_to_bf16(v);
      else d[i] = f32_to_f16(v);
    } else {
      float v = load<From>(src, i);
      if constexpr (std::is_same_v<To, float>) d[i] = v;
      else if constexpr (std::is_same_v<To, bf16>) d[i] = f32_to_bf16(v);
      else d[i] = f32_to_f16(v);
    }
  }
}

template <class From>
void convert_from(const void* src, void* dst, DType to, size_t n) {
  switch (to) {
    case DType::f32: return convert_typed<From, float>(src, dst, n);
    case DType::bf16: return convert_typed<From, bf16>(src, dst, n);
    case DType::f16: return convert_typed<From, f16>(src, dst, n);
    case DType::i64: return convert_typed<From, int64_t>(src, dst, n);
    case DType::boolean: return convert_typed<From, bool>(src, dst, n);
  }
}
}  // namespace

void convert(const void* src, DType from, void* dst, DType to, size_t n) {
  if (from == to) {
    std::memcpy(dst, src, n * dtype_size(from));
    return;
  }
  switch (from) {
    case DType::f32: return convert_from<float>(src, dst, to, n);
    case DType::bf16: return convert_from<bf16>(src, dst, to, n);
    case DType::f16: return convert_from<f16>(src, dst, to, n);
    case DType::i64: return convert_from<int64_t>(src, dst, to, n);
    case DType::boolean: return convert_from<bool>(src, dst, to, n);
  }
}

}  // namespace cpdit
