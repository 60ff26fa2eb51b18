// GGUF's block formats: decoded exactly as the gguf Python package's dequantize decodes them, and
// Linear computing from the blocks as it computes from their decoded values; safetensors' FP8 likewise.
#include <cpdit/core/error.hpp>
#include <cpdit/core/precision.hpp>
#include <cpdit/core/threads.hpp>
#include <cpdit/io/gguf.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/kernels/isa.hpp>
#include <cpdit/nn/load.hpp>

#include "support/random_normal.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

using namespace cpdit;

namespace {

const std::string kDir = std::string(CPDIT_TEST_DATA) + "/fixtures/gguf/";
const char* kFormats[] = {"f32",  "f16",  "bf16", "q8_0", "q4_0", "q4_1",
                          "q5_0", "q5_1", "q4_k", "q5_k", "q6_k", "q4_k_of_x"};

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

// How a Linear under bf16 precision may round: AVX512-VNNI quantises each 32-block of x to int8
// (scale max|x| / 127); AMX rounds x and the decoded weight to bf16.
enum class Rounding { int8_activations, bf16_operands };

// got against x W^T + b in float64. int8: each x value moves by at most half a step, max|x_block| /
// 254, so an output by that times sum |w| over the block, summed over the blocks; the int32 block sums
// are exact, and each block's f32 term takes a few roundings (2^-24 each) plus one in the running sum.
// bf16: x and w each move by at most 2^-9 relative, so a product by 2^-8 + 2^-18; the products are
// exact in f32 and k of them are summed in f32 (at most k roundings of the running sum).
void expect_within(Rounding rounding, const Tensor& x, const Weight& w, const Tensor& bias, const Tensor& got) {
  const Tensor decoded = kernels::dequantise(w);
  const int64_t k = x.size(-1), n = w.shape()[0], m = x.numel() / k;
  const float* xv = x.data<float>();
  const float* wv = decoded.data<float>();
  double worst_share = 0;  // the largest error as a share of its bound
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < n; ++c) {
      double want = bias.defined() ? double(bias.data<float>()[c]) : 0.0, int8 = 0, magnitude = std::abs(want);
      for (int64_t b = 0; b < k / 32; ++b) {
        double amax = 0, wsum = 0;
        for (int64_t j = b * 32; j < b * 32 + 32; ++j) {
          want += double(xv[r * k + j]) * double(wv[c * k + j]);
          magnitude += std::abs(double(xv[r * k + j]) * double(wv[c * k + j]));
          amax = std::max(amax, std::abs(double(xv[r * k + j])));
          wsum += std::abs(double(wv[c * k + j]));
        }
        int8 += amax / 254 * wsum;
      }
      const double bound = rounding == Rounding::int8_activations
                               ? int8 + (double(k) / 32 + 4) * 0x1p-24 * (magnitude + int8)
                               : (0x1p-8 + 0x1p-18) * magnitude + double(k + 2) * 0x1p-24 * (1 + 0x1p-8) * magnitude;
      const double error = std::abs(double(got.data<float>()[r * n + c]) - want);
      ASSERT_LE(error, bound) << w.describe() << " row " << r << " column " << c;
      worst_share = std::max(worst_share, error / bound);
    }
  // The rounding moves outputs by a visible share of the bound (else the exact f32 path ran instead).
  EXPECT_GT(worst_share, 0.01) << w.describe();
}

// Shapes off every tile and panel size: 13 rows (two full 6-row VNNI kernels and a partial one; one
// 32-token AMX block, partial) x 70 columns (two 32-feature blocks and a partial one); 37 x 45 over
// 3 blocks of k; 150 x 140 (two 128-row runs of the AMX weight decoding, the second partial); a single
// row. A row of zeros (a block with max|x| = 0); a bias (beta = 1 onto it) and none; 1 and 2 threads;
// a narrowed weight keeps the file's row stride. Q4_K's blocks are 256 values long.
void expect_every_shape_within(Rounding rounding, const std::vector<std::string>& formats) {
  struct Case {
    int64_t m, n, k;
  };
  for (const std::string& format : formats)
    for (Case shape : {Case{13, 70, 256}, Case{37, 45, 96}, Case{150, 140, 64}, Case{1, 33, 64}}) {
      if (format == "Q4_K") shape.k = 256;
      Tensor x = cpdit::testing::random_normal({shape.m, shape.k}, 11);
      if (shape.m > 4)
        for (int64_t j = 0; j < shape.k; ++j) x.data<float>()[4 * shape.k + j] = 0;
      Tensor bias = cpdit::testing::random_normal({shape.n}, 12);
      const Weight w =
          (format == "Q4_K" ? kernels::quantise(cpdit::testing::random_normal({shape.n + 30, shape.k}, 13), format)
                            : repeated_blocks(format, shape.n + 30, shape.k))
              .narrow_rows(20, shape.n);
      for (int threads : {1, 2}) {
        SCOPED_TRACE(format + " " + std::to_string(shape.m) + "x" + std::to_string(shape.n) + "x" +
                     std::to_string(shape.k) + " threads " + std::to_string(threads));
        ScopedComputeThreads team(threads);
        Tensor with_bias, without;
        {
          ScopedMatmulPrecision bf16(MatmulPrecision::bf16);
          with_bias = kernels::linear(x, w, bias);
          without = kernels::linear(x, w);
        }
        expect_within(rounding, x, w, bias, with_bias);
        expect_within(rounding, x, w, {}, without);
      }
    }
}

}  // namespace

TEST(LinearInt8, Q8_0AndQ4_0OnAvx512VnniAreWithinTheActivationRounding) {
  __builtin_cpu_init();
  if (kernels::detected_isa() < kernels::Isa::avx512 || !__builtin_cpu_supports("avx512vnni"))
    GTEST_SKIP() << "no AVX512-VNNI: the decode path serves both precisions";
  // Both levels below amx (where the AMX kernel would take the product) run the VNNI kernel.
  for (kernels::Isa isa : {kernels::Isa::avx512, kernels::Isa::avx512_bf16}) {
    const kernels::ScopedKernelIsa below_amx(isa);
    SCOPED_TRACE(kernels::isa_name(kernels::kernel_isa()));
    expect_every_shape_within(Rounding::int8_activations, {"Q8_0", "Q4_0"});
  }
}

TEST(LinearQuantisedAmx, BlockFormatsUnderBf16AreWithinBf16Rounding) {
  if (!kernels::amx_available()) GTEST_SKIP() << "no AMX tiles on this CPU";
  expect_every_shape_within(Rounding::bf16_operands, {"Q8_0", "Q4_0", "Q4_K"});
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

namespace {
// A safetensors file of raw tensors: (name, dtype, shape, bytes) in order (save_safetensors writes cpdit's
// own dtypes only).
struct RawTensor {
  std::string name, dtype, shape;
  std::string bytes;
};
std::string write_raw_safetensors(const std::string& name, const std::vector<RawTensor>& tensors) {
  std::string header = "{", data;
  for (const RawTensor& t : tensors) {
    header += (header.size() > 1 ? "," : "") + ("\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":" + t.shape +
              ",\"data_offsets\":[" + std::to_string(data.size()) + "," + std::to_string(data.size() + t.bytes.size()) + "]}");
    data += t.bytes;
  }
  header += "}";
  const std::string path = ::testing::TempDir() + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  const uint64_t n = header.size();
  std::fwrite(&n, 8, 1, f);
  std::fwrite(header.data(), 1, header.size(), f);
  std::fwrite(data.data(), 1, data.size(), f);
  std::fclose(f);
  return path;
}
std::string float_bytes(float v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
}  // namespace

// ComfyUI's scaled FP8: X.scale_weight multiplies X.weight's values (in f32, as ComfyUI's f32 weight times
// its f32 scale), the codes stay 8-bit, and the scale and the scaled_fp8 marker leave the state.
TEST(LinearQuantised, ComfyScaledFp8IsItsCodesTimesItsScale) {
  std::string codes;
  for (int i = 0; i < 8 * 16; ++i) codes.push_back(char((i * 29 + 3) % 0x78));  // finite E4M3 codes
  const float scale = 0.0371f;
  const std::string path = write_raw_safetensors(
      "scaled_fp8.safetensors", {{"layer.weight", "F8_E4M3", "[8,16]", codes},
                                 {"layer.scale_weight", "F32", "[]", float_bytes(scale)},
                                 {"layer.scale_input", "F32", "[]", float_bytes(1.0f)},
                                 {"scaled_fp8", "F8_E4M3", "[0]", ""}});
  const nn::StateDict state = nn::read_state_dict(io::Checkpoint::open(path));
  ASSERT_EQ(state.size(), 1u);
  const Weight& w = state.at("layer.weight");
  EXPECT_EQ(w.format(), "F8_E4M3");
  EXPECT_EQ(w.nbytes(), size_t(8 * 16));
  const Tensor widened = io::SafetensorsFile::open(path).get("layer.weight");
  Tensor want_values = Tensor::empty({8, 16});
  for (int64_t i = 0; i < 8 * 16; ++i) want_values.data<float>()[i] = widened.data<float>()[i] * scale;
  EXPECT_EQ(max_abs_diff(kernels::dequantise(w), want_values), 0.0);
  const Tensor x = cpdit::testing::random_normal({3, 16}, 10);
  const Tensor want = kernels::linear(x, want_values);
  EXPECT_LT(max_abs_diff(kernels::linear(x, w), want), 1e-5 * std::max(1.0, max_abs(want)));

  // A scale with no FP8 matrix beside it, or not one number, is one line.
  const std::string orphan = write_raw_safetensors("orphan_scale.safetensors",
                                                   {{"other.scale_weight", "F32", "[]", float_bytes(scale)}});
  EXPECT_THROW(
      {
        try {
          nn::read_state_dict(io::Checkpoint::open(orphan));
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("other.scale_weight scales no FP8 matrix"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
}

// A safetensors FP8 matrix stays as its 8-bit codes (a view of the file, 1 byte a value), decodes to
// exactly what the widening reader makes of it, and Linear computes from the codes as from those values.
TEST(LinearQuantised, SafetensorsFp8StaysEightBitAndComputesAsItsValues) {
  const std::string path = ::testing::TempDir() + "/fp8_matrix.safetensors";
  std::vector<uint8_t> codes(2 * 64 * 32);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = uint8_t((i * 37 + 11) % 256);
  for (uint8_t& c : codes)
    if ((c & 0x7f) >= 0x7c) c ^= 0x08;  // no E4M3 NaN (S.1111.111) and no E5M2 infinity or NaN: finite values only
  std::map<std::string, Tensor> tensors;
  {
    // Written through the raw header: save_safetensors writes cpdit's own dtypes only.
    std::string header = R"({"e4m3":{"dtype":"F8_E4M3","shape":[64,32],"data_offsets":[0,2048]},)"
                         R"("e5m2":{"dtype":"F8_E5M2","shape":[64,32],"data_offsets":[2048,4096]}})";
    while ((header.size() + 8) % 8) header += ' ';
    std::FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    const uint64_t n = header.size();
    std::fwrite(&n, 8, 1, f);
    std::fwrite(header.data(), 1, header.size(), f);
    std::fwrite(codes.data(), 1, codes.size(), f);
    std::fclose(f);
  }
  const io::SafetensorsFile file = io::SafetensorsFile::open(path);
  Tensor x = cpdit::testing::random_normal({3, 32}, 9);
  for (const char* name : {"e4m3", "e5m2"}) {
    const Weight w = file.weight(name);
    EXPECT_EQ(w.format(), name == std::string("e4m3") ? "F8_E4M3" : "F8_E5M2");
    EXPECT_EQ(w.nbytes(), size_t(64 * 32)) << name;
    const Tensor widened = file.get(name);
    EXPECT_EQ(max_abs_diff(kernels::dequantise(w), widened), 0.0) << name;
    const Tensor want = kernels::linear(x, widened);
    // The same decoded values through one sgemm or tile by tile: rounding of 32-term f32 sums only.
    EXPECT_LT(max_abs_diff(kernels::linear(x, w), want), 1e-5 * std::max(1.0, max_abs(want))) << name;
  }
}
