// GGUF's block formats: decoded exactly as the gguf Python package's dequantize decodes them, and
// Linear computing from the blocks as it computes from their decoded values.
#include <cpdit/core/error.hpp>
#include <cpdit/io/gguf.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/kernels/cpu.hpp>

#include "support/random_normal.hpp"

#include <gtest/gtest.h>

using namespace cpdit;

namespace {

const std::string kDir = std::string(CPDIT_TEST_DATA) + "/fixtures/gguf/";
const char* kFormats[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k", "q4_k_of_x"};

double max_abs(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, double(std::abs(t.data<float>()[i])));
  return m;
}

}  // namespace

TEST(Dequantise, EveryFormatMatchesTheGgufPackageExactly) {
  io::GgufFile file = io::GgufFile::open(kDir + "blocks.gguf");
  auto expected = io::load_safetensors(kDir + "blocks_dequantised.safetensors");
  for (const char* name : kFormats) {
    Tensor values = kernels::dequantise(file.get(name));
    ASSERT_EQ(values.shape(), expected.at(name).shape()) << name;
    // Same f32 operations in the same order as numpy's: bit-for-bit.
    EXPECT_EQ(max_abs_diff(values, expected.at(name)), 0.0) << name;
  }
}

TEST(LinearQuantised, EqualsLinearOnTheDecodedWeight) {
  io::GgufFile file = io::GgufFile::open(kDir + "blocks.gguf");
  Tensor x = cpdit::testing::random_normal({3, 5, 512}, 7);
  Tensor bias = cpdit::testing::random_normal({4}, 8);
  for (const char* name : kFormats) {
    Weight w = file.get(name);
    if (!w.is_quantised()) continue;
    Tensor want = kernels::linear(x, kernels::dequantise(w), bias);
    Tensor got = kernels::linear(x, w, bias);
    ASSERT_EQ(got.shape(), want.shape()) << name;
    // The same sgemm on the same decoded values; only the tile split may reorder its f32 sums
    // (512 terms of |x w| <= a few units each: a few hundred ulps of 1e-7 at most).
    EXPECT_LT(max_abs_diff(got, want), 1e-5 * std::max(1.0, max_abs(want))) << name;
  }
}

TEST(LinearQuantised, ManyTilesAndNarrowedRows) {
  // 600 rows of 256: several tiles, the last one partial.
  const int64_t rows = 600, cols = 256;
  io::GgufFile file = io::GgufFile::open(kDir + "blocks.gguf");
  Weight block = file.get("q4_0");  // (4, 512) -> 8 rows of 256 values each, as bytes
  Tensor bytes = Tensor::empty({rows, cols / 32 * 18}, DType::boolean);
  const auto* src = static_cast<const uint8_t*>(block.codes().raw());
  auto* dst = static_cast<uint8_t*>(bytes.raw());
  for (int64_t i = 0; i < int64_t(bytes.nbytes()); ++i) dst[i] = src[i % block.codes().nbytes()];
  Weight w = Weight::blocks({rows, cols}, "Q4_0", bytes);
  Tensor x = cpdit::testing::random_normal({2, cols}, 9);
  Tensor want = kernels::linear(x, kernels::dequantise(w));
  EXPECT_LT(max_abs_diff(kernels::linear(x, w), want), 1e-5 * std::max(1.0, max_abs(want)));
  Weight middle = w.narrow_rows(100, 300);
  Tensor middle_want = kernels::linear(x, kernels::dequantise(w).narrow(0, 100, 300).contiguous());
  EXPECT_LT(max_abs_diff(kernels::linear(x, middle), middle_want), 1e-5 * std::max(1.0, max_abs(middle_want)));
  Tensor out = Tensor::empty({2, rows});
  kernels::linear_into(x, w, {}, out);
  EXPECT_LT(max_abs_diff(out, want), 1e-5 * std::max(1.0, max_abs(want)));
}

TEST(LinearQuantised, RefusesWhatItCannotCompute) {
  io::GgufFile file = io::GgufFile::open(kDir + "blocks.gguf");
  EXPECT_THROW(kernels::linear(cpdit::testing::random_normal({2, 511}, 1), file.get("q8_0")), Error);
  EXPECT_THROW(kernels::linear_bf16_compute(cpdit::testing::random_normal({2, 512}, 1), file.get("q8_0")), Error);
}
