// Dtypes cpdit converts on load, checked on files assembled by hand from known bytes.
#include "io_test_util.hpp"

#include <cpdit/io/safetensors.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace cpdit;
using namespace cpdit::io;
using namespace cpdit::io::test;

namespace {

// One tensor "x" of `dtype`, shape (n), holding `data`.
SafetensorsFile one_tensor_file(const TempDir& dir, const std::string& dtype, size_t n, const std::string& data) {
  std::string header = "{\"x\":{\"dtype\":\"" + dtype + "\",\"shape\":[" + std::to_string(n) +
                       "],\"data_offsets\":[0," + std::to_string(data.size()) + "]}}";
  write_bytes(dir.file("x.safetensors"), raw_safetensors(header, data));
  return SafetensorsFile::open(dir.file("x.safetensors"));
}

// FP8 reference from the format definitions, computed in double with pow (not the decoder's ldexp).
double f8_reference(int code, int exponent_bits, int mantissa_bits, int bias, bool ieee_specials) {
  int sign = code >> 7;
  int exponent = (code >> mantissa_bits) & ((1 << exponent_bits) - 1);
  int mantissa = code & ((1 << mantissa_bits) - 1);
  int max_exponent = (1 << exponent_bits) - 1;
  double s = sign ? -1.0 : 1.0;
  if (ieee_specials && exponent == max_exponent)
    return mantissa == 0 ? s * std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  if (!ieee_specials && exponent == max_exponent && mantissa == (1 << mantissa_bits) - 1)
    return std::numeric_limits<double>::quiet_NaN();
  double fraction = double(mantissa) / double(1 << mantissa_bits);
  if (exponent == 0) return s * fraction * std::pow(2.0, 1 - bias);
  return s * (1.0 + fraction) * std::pow(2.0, exponent - bias);
}

void expect_all_f8_codes(const std::string& dtype, int exponent_bits, int mantissa_bits, int bias, bool ieee) {
  TempDir dir;
  std::string codes;
  for (int c = 0; c < 256; ++c) codes.push_back(char(c));
  Tensor t = one_tensor_file(dir, dtype, 256, codes).get("x");
  ASSERT_EQ(t.dtype(), DType::f32);
  const float* v = t.data<float>();
  for (int c = 0; c < 256; ++c) {
    double expected = f8_reference(c, exponent_bits, mantissa_bits, bias, ieee);
    if (std::isnan(expected))
      EXPECT_TRUE(std::isnan(v[c])) << dtype << " code " << c;
    else
      EXPECT_EQ(double(v[c]), expected) << dtype << " code " << c;
    if (expected == 0) {
      EXPECT_EQ(std::signbit(v[c]), bool(c & 0x80)) << dtype << " code " << c;
    }
  }
}

}  // namespace

TEST(Conversion, F8E4M3AllCodesExact) {
  expect_all_f8_codes("F8_E4M3", 4, 3, 7, false);
  // Landmarks of the fn variant: largest finite 448, smallest subnormal 2^-9, no infinity.
  TempDir dir;
  Tensor t = one_tensor_file(dir, "F8_E4M3", 3, std::string("\x7e\x01\x78", 3)).get("x");
  EXPECT_EQ(t.data<float>()[0], 448.0f);
  EXPECT_EQ(t.data<float>()[1], std::ldexp(1.0f, -9));
  EXPECT_EQ(t.data<float>()[2], 256.0f);
}

TEST(Conversion, F8E5M2AllCodesExact) {
  expect_all_f8_codes("F8_E5M2", 5, 2, 15, true);
  TempDir dir;
  Tensor t = one_tensor_file(dir, "F8_E5M2", 2, std::string("\x7b\x7c", 2)).get("x");
  EXPECT_EQ(t.data<float>()[0], 57344.0f);
  EXPECT_TRUE(std::isinf(t.data<float>()[1]));
}

TEST(Conversion, F64RoundsToNearestF32) {
  TempDir dir;
  std::vector<double> values = {0.0, -1.5, 1.0 / 3.0, 1e300, -1e-300, 3.4028235677973366e38};
  Tensor t = one_tensor_file(dir, "F64", values.size(), bytes_of(values)).get("x");
  ASSERT_EQ(t.dtype(), DType::f32);
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(t.data<float>()[i], static_cast<float>(values[i])) << i;
  EXPECT_TRUE(std::isinf(t.data<float>()[3]));
}

TEST(Conversion, IntegersWidenToI64WithSign) {
  TempDir dir;
  auto check = [&](const std::string& dtype, const std::string& data, const std::vector<int64_t>& expected) {
    Tensor t = one_tensor_file(dir, dtype, expected.size(), data).get("x");
    ASSERT_EQ(t.dtype(), DType::i64) << dtype;
    EXPECT_EQ(std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel()), expected) << dtype;
  };
  check("I32", bytes_of(std::vector<int32_t>{0, -1, 2147483647, -2147483647 - 1}), {0, -1, 2147483647, -2147483648LL});
  check("I16", bytes_of(std::vector<int16_t>{-32768, 32767, -2}), {-32768, 32767, -2});
  check("I8", bytes_of(std::vector<int8_t>{-128, 127, -1}), {-128, 127, -1});
  check("U8", bytes_of(std::vector<uint8_t>{0, 255, 128}), {0, 255, 128});
}

TEST(Conversion, FormatDtypesCpditCannotUseFailOnGetOnly) {
  TempDir dir;
  SafetensorsFile file = one_tensor_file(dir, "U32", 2, bytes_of(std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(file.info("x").dtype, "U32");  // the file itself is valid
  expect_error([&] { file.get("x"); }, {"x.safetensors", "'x'", "U32", "cannot load"});
}

TEST(Conversion, MisalignedNativeDataIsCopied) {
  // An I8 tensor of 1 byte first puts the F32 tensor at data offset 1: not 4-aligned.
  TempDir dir;
  std::vector<float> values = {1.5f, -2.25f, 3.0f};
  std::string header = R"({"a":{"dtype":"I8","shape":[1],"data_offsets":[0,1]},)"
                       R"("b":{"dtype":"F32","shape":[3],"data_offsets":[1,13]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  write_bytes(dir.file("m.safetensors"), raw_safetensors(header, std::string(1, '\x05') + bytes_of(values)));
  Tensor b = SafetensorsFile::open(dir.file("m.safetensors")).get("b");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.raw()) % alignof(float), 0u);
  EXPECT_EQ(std::vector<float>(b.data<float>(), b.data<float>() + 3), values);
}

TEST(Conversion, BoolBytesOtherThanZeroOrOneAreRejected) {
  TempDir dir;
  SafetensorsFile file = one_tensor_file(dir, "BOOL", 3, std::string("\x01\x00\x02", 3));
  expect_error([&] { file.get("x"); }, {"x.safetensors", "'x'", "BOOL byte 2 is 2"});
}
