#include <cpdit/core/dtype.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace cpdit;

namespace {
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// Reference: round a float to `mantissa` bits, nearest even, in double (exact for these ranges).
double round_to_mantissa(double x, int mantissa) {
  if (x == 0) return x;
  int e;
  std::frexp(x, &e);
  double unit = std::ldexp(1.0, e - 1 - mantissa);
  return std::nearbyint(x / unit) * unit;  // default rounding mode: ties to even
}
}  // namespace

TEST(DType, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 is exactly half way between bf16 neighbours 1 and 1 + 2^-7: ties go to even (1).
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  // 1 + 3*2^-8 is half way between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
  for (uint32_t u = 0x3f800000u; u < 0x3f800000u + 70000u; u += 7) {
    float f = from_bits(u);
    EXPECT_EQ(double(bf16_to_f32(f32_to_bf16(f))), round_to_mantissa(f, 7)) << f;
  }
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::infinity()))));
}

TEST(DType, F16RoundsToNearestEvenIncludingSubnormals) {
  for (float f : {0.0f, 1.0f, -2.0f, 65504.0f, 0.333333f, 6.1035156e-05f, 5.9604645e-08f, 1e-7f, 3e-6f}) {
    double expected = std::fabs(f) < 6.103515625e-05 ? std::nearbyint(double(f) * 16777216.0) / 16777216.0
                                                     : round_to_mantissa(f, 10);
    EXPECT_EQ(double(f16_to_f32(f32_to_f16(f))), expected) << f;
  }
  EXPECT_TRUE(std::isinf(f16_to_f32(f32_to_f16(70000.0f))));
  EXPECT_EQ(f16_to_f32(f32_to_f16(65519.0f)), 65504.0f);  // below the half-way point to 65536
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(std::numeric_limits<float>::quiet_NaN()))));
  // Every f16 bit pattern survives f16 -> f32 -> f16.
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    f16 h{uint16_t(b)};
    float f = f16_to_f32(h);
    if (std::isnan(f)) continue;
    EXPECT_EQ(f32_to_f16(f).bits, h.bits) << b;
  }
}
