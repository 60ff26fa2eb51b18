// GGUF's block formats: decoded exactly as the gguf Python package's dequantize decodes them, and
// Linear computing from the blocks as it computes from their decoded values.
#include <cpdit/core/error.hpp>
#include <cpdit/core/precision.hpp>
#include <cpdit/core/threads.hpp>
#include <cpdit/io/gguf.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/kernels/isa.hpp>

#include "support/random_normal.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

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

namespace {

// A (rows, cols) Q8_0 or Q4_0 weight of `rows` rows made by repeating blocks.gguf's blocks.
Weight repeated_blocks(const std::string& format, int64_t rows, int64_t cols) {
  Weight block = io::GgufFile::open(kDir + "blocks.gguf").get(format == "Q8_0" ? "q8_0" : "q4_0");
  const int64_t block_bytes = format == "Q8_0" ? 34 : 18;
  Tensor bytes = Tensor::empty({rows, cols / 32 * block_bytes}, DType::boolean);
  const auto* src = static_cast<const uint8_t*>(block.codes().raw());
  auto* dst = static_cast<uint8_t*>(bytes.raw());
  for (int64_t i = 0; i < int64_t(bytes.nbytes()); ++i) dst[i] = src[i % block.codes().nbytes()];
  return Weight::blocks({rows, cols}, format, bytes);
}

// Under bf16 precision a Q8_0 / Q4_0 Linear quantises each 32-block of x to int8 (scale max|x| / 127),
// so each x value moves by at most half a step, max|x_block| / 254. Checked against x W^T + b in
// float64: each output may be off by that step times sum |w| over the block, summed over the blocks,
// plus the f32 rounding of the scaled block sums and their accumulation.
void expect_within_activation_rounding(const Tensor& x, const Weight& w, const Tensor& bias, const Tensor& got) {
  const Tensor decoded = kernels::dequantise(w);
  const int64_t k = x.size(-1), n = w.shape()[0], m = x.numel() / k;
  const float* xv = x.data<float>();
  const float* wv = decoded.data<float>();
  double worst_share = 0;  // the largest error as a share of its bound
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < n; ++c) {
      double want = bias.defined() ? double(bias.data<float>()[c]) : 0.0, rounding = 0, magnitude = std::abs(want);
      for (int64_t b = 0; b < k / 32; ++b) {
        double amax = 0, wsum = 0;
        for (int64_t j = b * 32; j < b * 32 + 32; ++j) {
          want += double(xv[r * k + j]) * double(wv[c * k + j]);
          magnitude += std::abs(double(xv[r * k + j]) * double(wv[c * k + j]));
          amax = std::max(amax, std::abs(double(xv[r * k + j])));
          wsum += std::abs(double(wv[c * k + j]));
        }
        rounding += amax / 254 * wsum;
      }
      // f32: the int32 block sums are exact; each block's term takes a few roundings (2^-24 each) and
      // the running sum one per block, all of at most the size of sum |x w| plus the rounding above.
      const double f32 = (double(k) / 32 + 4) * 0x1p-24 * (magnitude + rounding);
      const double bound = rounding + f32;
      const double error = std::abs(double(got.data<float>()[r * n + c]) - want);
      ASSERT_LE(error, bound) << w.describe() << " row " << r << " column " << c;
      worst_share = std::max(worst_share, error / bound);
    }
  // Rounding 8-bit activations moves outputs by a visible share of the bound (else the int8 path
  // did not run, or not on these weights).
  EXPECT_GT(worst_share, 0.01) << w.describe();
}

struct Int8Kernel {
  const char* name;
  kernels::Isa isa;  // the AMX kernel runs at the top level only; one below it, the AVX512-VNNI kernel
  bool available;
};

std::vector<Int8Kernel> int8_kernels() {
  __builtin_cpu_init();
  return {{"amx-int8", kernels::Isa::avx512_bf16,
           kernels::detected_isa() == kernels::Isa::avx512_bf16 && __builtin_cpu_supports("amx-int8")},
          {"avx512-vnni", kernels::Isa::avx512,
           kernels::detected_isa() >= kernels::Isa::avx512 && __builtin_cpu_supports("avx512vnni")}};
}

}  // namespace

// Shapes off every tile and panel size: 13 rows (two full 6-row VNNI kernels and a partial one; one
// 32-token AMX block, partial) x 70 columns (two 32-feature blocks and a partial one), and 37 x 45 over
// 3 blocks of k (an odd count: the AMX kernel scales each block's sums while the next one computes);
// 150 x 140 (two 128-token and two 128-feature runs, partial); a single row. A row of zeros (a block
// with max|x| = 0); a bias (beta = 1 onto it) and none; 1 and 2 threads; a narrowed weight keeps the
// file's row stride.
TEST(LinearInt8, Q8_0AndQ4_0UnderBf16AreWithinTheActivationRounding) {
  struct Case {
    int64_t m, n, k;
  };
  int ran = 0;
  for (const Int8Kernel& kernel : int8_kernels()) {
    if (!kernel.available) continue;
    ++ran;
    const kernels::ScopedKernelIsa isa(kernel.isa);
    for (const Case& shape : {Case{13, 70, 256}, Case{37, 45, 96}, Case{150, 140, 64}, Case{1, 33, 64}}) {
      Tensor x = cpdit::testing::random_normal({shape.m, shape.k}, 11);
      if (shape.m > 4)
        for (int64_t j = 0; j < shape.k; ++j) x.data<float>()[4 * shape.k + j] = 0;
      Tensor bias = cpdit::testing::random_normal({shape.n}, 12);
      for (const char* format : {"Q8_0", "Q4_0"}) {
        Weight w = repeated_blocks(format, shape.n + 30, shape.k).narrow_rows(20, shape.n);
        for (int threads : {1, 2}) {
          SCOPED_TRACE(std::string(kernel.name) + " " + format + " " + std::to_string(shape.m) + "x" +
                       std::to_string(shape.n) + "x" + std::to_string(shape.k) + " threads " + std::to_string(threads));
          ScopedComputeThreads team(threads);
          Tensor with_bias, without;
          {
            ScopedMatmulPrecision bf16(MatmulPrecision::bf16);
            with_bias = kernels::linear(x, w, bias);
            without = kernels::linear(x, w);
          }
          expect_within_activation_rounding(x, w, bias, with_bias);
          expect_within_activation_rounding(x, w, {}, without);
        }
      }
    }
  }
  if (ran == 0) GTEST_SKIP() << "neither AMX-INT8 nor AVX512-VNNI: the decode path serves both precisions";
}

TEST(Quantise, Q8_0AndQ4_KGiveTheReferenceBytes) {
  io::GgufFile file = io::GgufFile::open(kDir + "blocks.gguf");
  const Tensor x = file.get("f32").values();
  // q8_0: the gguf package's quantize of x; q4_k_of_x: the fixture script's Q4_K encoder (same rules).
  for (const auto& [format, name] : {std::pair{"Q8_0", "q8_0"}, std::pair{"Q4_K", "q4_k_of_x"}}) {
    const Weight got = kernels::quantise(x, format);
    const Weight stored = file.get(name);
    const Tensor& want = stored.codes();
    ASSERT_EQ(got.codes().nbytes(), want.nbytes()) << format;
    EXPECT_EQ(std::memcmp(got.codes().raw(), want.raw(), want.nbytes()), 0) << format;
  }
  EXPECT_THROW(kernels::quantise(x, "Q5_K"), Error);
  EXPECT_THROW(kernels::quantise(cpdit::testing::random_normal({2, 48}, 1), "Q8_0"), Error);
}
