#include "kernels/reference.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/core/precision.hpp>
#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/kernels/isa.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

using namespace cpdit;
using cpdit::test::expect_within;
using cpdit::test::random_tensor;
using cpdit::test::to_double;

namespace {

// y = x W^T + b in double, with a bound of 1e-5 times the sum of |terms| (f32 accumulation).
struct LinearReference {
  std::vector<double> y, bound;
};

LinearReference reference_linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  const int64_t k = w.size(1), n = w.size(0), m = x.numel() / k;
  auto xv = to_double(x), wv = to_double(w);
  std::vector<double> bv = b.defined() ? to_double(b) : std::vector<double>(size_t(n), 0.0);
  LinearReference r{std::vector<double>(size_t(m * n)), std::vector<double>(size_t(m * n))};
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = bv[size_t(j)], magnitude = std::abs(bv[size_t(j)]);
      for (int64_t l = 0; l < k; ++l) {
        double term = xv[size_t(i * k + l)] * wv[size_t(j * k + l)];
        sum += term;
        magnitude += std::abs(term);
      }
      r.y[size_t(i * n + j)] = sum;
      r.bound[size_t(i * n + j)] = 1e-5 * magnitude + 1e-30;
    }
  return r;
}

Tensor bf16_rounded(const Tensor& t) { return t.to(DType::bf16).to(DType::f32); }

struct LinearShape {
  Shape x;  // (..., in)
  int64_t out;
};

const LinearShape kShapes[] = {{{1, 1}, 1}, {{7, 33}, 5}, {{33, 257}, 7}, {{2, 3, 7}, 33}, {{1, 65, 128}, 96}};

}  // namespace

TEST(Linear, MatchesDoubleReferenceWithAndWithoutBias) {
  uint32_t seed = 1;
  for (const auto& s : kShapes) {
    const int64_t in = s.x.back();
    Tensor x = random_tensor(s.x, seed++), w = random_tensor({s.out, in}, seed++), b = random_tensor({s.out}, seed++);
    for (bool with_bias : {false, true}) {
      SCOPED_TRACE(shape_string(s.x) + " -> " + std::to_string(s.out) + (with_bias ? " with bias" : " no bias"));
      Tensor bias = with_bias ? b : Tensor();
      Tensor y = kernels::linear(x, w, bias);
      Shape want = s.x;
      want.back() = s.out;
      EXPECT_EQ(y.shape(), want);
      auto ref = reference_linear(x, w, bias);
      expect_within(y, ref.y, ref.bound);
    }
  }
}

// bf16 and f16 weights and biases (as a half-precision checkpoint stores them) are widened exactly:
// the result is the f32 path's on the widened values, bit for bit.
TEST(Linear, HalfPrecisionWeightsAreWidenedExactly) {
  uint32_t seed = 100;
  for (const auto& s : kShapes)
    for (DType half : {DType::bf16, DType::f16}) {
      SCOPED_TRACE(shape_string(s.x) + " -> " + std::to_string(s.out) + " " + dtype_name(half));
      Tensor x = random_tensor(s.x, seed++), w = random_tensor({s.out, s.x.back()}, seed++);
      Tensor b = random_tensor({s.out}, seed++);
      Tensor w_half = w.to(half), b_half = b.to(half);
      Tensor y = kernels::linear(x, w_half, b_half);
      EXPECT_EQ(max_abs_diff(y, kernels::linear(x, w_half.to(DType::f32), b_half.to(DType::f32))), 0.0);
      auto ref = reference_linear(x, w_half.to(DType::f32), b_half.to(DType::f32));
      expect_within(y, ref.y, ref.bound);
    }
}

TEST(Linear, RefusesAQuantisedFormatByName) {
  BlockQuantisation q{"Q4_0", 32, Tensor::zeros({3, 2}, DType::f16)};
  Weight w = Weight::quantised({3, 64}, Tensor::zeros({3, 32}, DType::boolean), q);
  Tensor x = random_tensor({2, 64}, 1);
  for (auto call : {+[](const Tensor& x, const Weight& w) { kernels::linear(x, w); },
                    +[](const Tensor& x, const Weight& w) { kernels::linear_bf16_compute(x, w); }}) {
    try {
      call(x, w);
      ADD_FAILURE() << "a Q4_0 weight was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::unsupported);
      EXPECT_NE(std::string(e.what()).find("Q4_0(3, 64)"), std::string::npos) << e.what();
    }
  }
}

TEST(LinearBf16Compute, RoundsActivationsToBf16AndAccumulatesInF32) {
  uint32_t seed = 200;
  for (const auto& s : kShapes) {
    SCOPED_TRACE(shape_string(s.x) + " -> " + std::to_string(s.out));
    Tensor x = random_tensor(s.x, seed++), w = random_tensor({s.out, s.x.back()}, seed++);
    Tensor b = random_tensor({s.out}, seed++);
    for (const Tensor& bias : {Tensor(), b}) {
      auto ref = reference_linear(bf16_rounded(x), bf16_rounded(w), bias);
      expect_within(kernels::linear_bf16_compute(x, w.to(DType::bf16), bias), ref.y, ref.bound);
    }
  }
  EXPECT_THROW(kernels::linear_bf16_compute(random_tensor({2, 4}, 1), random_tensor({3, 4}, 2)), Error);
}

// Each bf16 product against the float64 product of the bf16-rounded operands, on shapes that are not
// multiples of the AMX kernel's tiles (32 features x 32 tokens, steps of 32 k values; k odd, one
// token, and several blocks with tails in every dim; the last shape crosses every cache-blocking
// boundary of the AMX kernel: two token runs of up to 512, two feature runs of up to 256 (the second
// partial, whose rows the first prefetches), three spans of up to 512 k values). The bound is reference_linear's
// f32-accumulation bound: rounding x to bf16 is part of the promised result (the reference rounds it
// the same way), and each bf16 x bf16 product is exact in f32, so only the f32 sums differ.
namespace {
const LinearShape kOddShapes[] = {{{1, 1}, 1}, {{1, 33}, 17}, {{31, 95}, 33}, {{2, 37, 131}, 70}, {{65, 64}, 96},
                                  {{513, 1057}, 263}};
// At most 4 tokens (the few-token product's limit): k below, at and past one vector of 32 with a
// tail, output features not a multiple of its 4 rows per step, tokens 1 to 4.
const LinearShape kFewTokenShapes[] = {{{1, 1}, 1},   {{1, 33}, 17},  {{2, 95}, 33},    {{3, 32}, 6},
                                       {{4, 131}, 70}, {{1, 2, 64}, 5}, {{3, 1057}, 263}};

void expect_bf16_product_matches_reference(kernels::Bf16Matmul how, const std::vector<LinearShape>& shapes) {
  uint32_t seed = 400;
  for (const auto& s : shapes)
    for (int threads : {1, 2}) {
      SCOPED_TRACE(shape_string(s.x) + " -> " + std::to_string(s.out) + ", " + std::to_string(threads) + " threads");
      ScopedComputeThreads budget(threads);
      Tensor x = random_tensor(s.x, seed++), w = random_tensor({s.out, s.x.back()}, seed++);
      Tensor b = random_tensor({s.out}, seed++);
      for (const Tensor& bias : {Tensor(), b}) {
        auto ref = reference_linear(bf16_rounded(x), bf16_rounded(w), bias);
        expect_within(kernels::linear_bf16_compute(x, w.to(DType::bf16), bias, how), ref.y, ref.bound);
      }
    }
}
}  // namespace

TEST(LinearBf16Compute, AmxTilesMatchTheDoubleReferenceOnOddShapes) {
  if (!kernels::amx_available()) {
    EXPECT_THROW(kernels::linear_bf16_compute(random_tensor({2, 4}, 1), random_tensor({3, 4}, 2).to(DType::bf16), {},
                                              kernels::Bf16Matmul::amx),
                 Error);
    GTEST_SKIP() << "no AMX tiles on this CPU or build";
  }
  expect_bf16_product_matches_reference(kernels::Bf16Matmul::amx, {std::begin(kOddShapes), std::end(kOddShapes)});
}

// A mapped checkpoint's weight need not start on a 64-byte line (safetensors aligns its tensors to 8
// bytes, GGUF to 32); the AMX kernel reads such a weight through aligned copies of its spans, which must
// give bit for bit the product of the same weight on the line. Three spans of k and two feature runs
// (the second partial), so that every copy boundary is crossed.
TEST(LinearBf16Compute, AmxTilesReadAWeightOffTheLineAsOnIt) {
  if (!kernels::amx_available()) GTEST_SKIP() << "no AMX tiles on this CPU or build";
  const Tensor x = random_tensor({70, 1088}, 600), b = random_tensor({288}, 602);
  const Tensor w = random_tensor({288, 1088}, 601).to(DType::bf16);
  const auto ref = reference_linear(bf16_rounded(x), bf16_rounded(w), b);
  const Tensor on_line = kernels::linear_bf16_compute(x, w, b, kernels::Bf16Matmul::amx);
  expect_within(on_line, ref.y, ref.bound);
  for (int64_t offset : {8, 32, 62}) {
    SCOPED_TRACE("offset " + std::to_string(offset));
    auto backing = std::make_shared<Tensor>(Tensor::empty({w.numel() + 32}, DType::bf16));
    std::byte* start = static_cast<std::byte*>(backing->raw()) + offset;
    ASSERT_EQ(reinterpret_cast<uintptr_t>(start) % 64, uint64_t(offset));
    std::memcpy(start, w.raw(), w.nbytes());
    const Tensor off_line = Tensor::borrow(start, w.shape(), DType::bf16, backing);
    EXPECT_EQ(max_abs_diff(kernels::linear_bf16_compute(x, off_line, b, kernels::Bf16Matmul::amx), on_line), 0.0);
  }
}

// Rows a multiple of 8 KiB apart over runs wider than 4 MiB (k 12288) are read through span copies
// on the line too (a partial run of 70 rows; the copies' partial last span is the test above's).
TEST(LinearBf16Compute, AmxTilesReadWideRowsThroughSpanCopies) {
  if (!kernels::amx_available()) GTEST_SKIP() << "no AMX tiles on this CPU or build";
  const Tensor x = random_tensor({40, 12288}, 610), b = random_tensor({70}, 612);
  const Tensor w = random_tensor({70, 12288}, 611).to(DType::bf16);
  const auto ref = reference_linear(bf16_rounded(x), bf16_rounded(w), b);
  expect_within(kernels::linear_bf16_compute(x, w, b, kernels::Bf16Matmul::amx), ref.y, ref.bound);
}

TEST(LinearBf16Compute, OneDnnMatmulMatchesTheDoubleReferenceOnOddShapes) {
  expect_bf16_product_matches_reference(kernels::Bf16Matmul::onednn, {std::begin(kOddShapes), std::end(kOddShapes)});
}

TEST(LinearBf16Compute, FewTokenRowsMatchTheDoubleReference) {
  if (kernels::kernel_isa() < kernels::Isa::avx512_bf16) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  expect_bf16_product_matches_reference(kernels::Bf16Matmul::rows,
                                        {std::begin(kFewTokenShapes), std::end(kFewTokenShapes)});
  // More tokens than it serves, or a CPU level without bf16 dot products: refused, not computed wrongly.
  const Tensor w = random_tensor({3, 8}, 2).to(DType::bf16);
  EXPECT_THROW(kernels::linear_bf16_compute(random_tensor({5, 8}, 1), w, {}, kernels::Bf16Matmul::rows), Error);
  const kernels::ScopedKernelIsa below(kernels::Isa::avx512);
  EXPECT_THROW(kernels::linear_bf16_compute(random_tensor({1, 8}, 1), w, {}, kernels::Bf16Matmul::rows), Error);
}

// The kernel-ISA level picks the bf16 product: our AMX kernel at amx, oneDNN's matmul below it (what a
// CPU without AMX, e.g. Zen 4, runs), each bit for bit what that product gives when asked by name.
TEST(LinearBf16Compute, FastestFollowsTheKernelIsaLevel) {
  Tensor x = random_tensor({70, 96}, 500), w = random_tensor({33, 96}, 501), b = random_tensor({33}, 502);
  const Tensor w_bf16 = w.to(DType::bf16);
  const auto ref = reference_linear(bf16_rounded(x), bf16_rounded(w), b);
  for (kernels::Isa isa : {kernels::Isa::avx512, kernels::Isa::avx512_bf16, kernels::Isa::amx}) {
    const kernels::ScopedKernelIsa level(isa);
    SCOPED_TRACE(kernels::isa_name(kernels::kernel_isa()));
    const bool amx = kernels::kernel_isa() == kernels::Isa::amx;
    EXPECT_EQ(kernels::amx_available(), amx);
    const Tensor fastest = kernels::linear_bf16_compute(x, w_bf16, b);
    expect_within(fastest, ref.y, ref.bound);
    const Tensor named =
        kernels::linear_bf16_compute(x, w_bf16, b, amx ? kernels::Bf16Matmul::amx : kernels::Bf16Matmul::onednn);
    EXPECT_EQ(max_abs_diff(fastest, named), 0.0);
    // One token (a modulation's timestep embedding): the few-token rows where bf16 dot products exist.
    const Tensor one = x.narrow(0, 0, 1).contiguous();
    const bool rows = kernels::kernel_isa() >= kernels::Isa::avx512_bf16;
    EXPECT_EQ(max_abs_diff(kernels::linear_bf16_compute(one, w_bf16, b),
                           kernels::linear_bf16_compute(one, w_bf16, b,
                                                        rows ? kernels::Bf16Matmul::rows : kernels::Bf16Matmul::onednn)),
              0.0);
  }
}

// --dtype bf16's arithmetic: under MatmulPrecision::bf16 a bf16 weight's Linear rounds x to bf16 and
// accumulates bf16 products in f32 (checked against the float64 product of the rounded operands),
// linear and linear_into alike; an f32 weight, or any weight under exact_f32, keeps f32 products.
TEST(Linear, Bf16PrecisionComputesBf16WeightsInBf16AndLeavesF32Exact) {
  Tensor x = random_tensor({3, 5, 67}, 300), w = random_tensor({41, 67}, 301), b = random_tensor({41}, 302);
  Tensor w_bf16 = w.to(DType::bf16);
  auto ref_bf16 = reference_linear(bf16_rounded(x), bf16_rounded(w), b);
  auto ref_f32 = reference_linear(x, w, b);
  auto ref_widened = reference_linear(x, bf16_rounded(w), b);
  const Tensor exact_bf16_weight = kernels::linear(x, w_bf16, b);
  const Tensor exact_f32_weight = kernels::linear(x, w, b);
  {
    ScopedMatmulPrecision precision(MatmulPrecision::bf16);
    EXPECT_EQ(matmul_precision(), MatmulPrecision::bf16);
    const Tensor y = kernels::linear(x, w_bf16, b);
    expect_within(y, ref_bf16.y, ref_bf16.bound);
    // x's rounding to bf16 moves the result by far more than f32 rounding: the bf16 path really ran.
    EXPECT_GT(max_abs_diff(y, exact_bf16_weight), 1e-4);
    EXPECT_EQ(max_abs_diff(y, kernels::linear_bf16_compute(x, w_bf16, b)), 0.0);
    Tensor out = Tensor::full({3, 5, 41}, 123.0);
    kernels::linear_into(x, w_bf16, b, out);
    EXPECT_EQ(max_abs_diff(out, y), 0.0);
    // An f32 weight is not narrowed behind the caller's back.
    EXPECT_EQ(max_abs_diff(kernels::linear(x, w, b), exact_f32_weight), 0.0);
  }
  EXPECT_EQ(matmul_precision(), MatmulPrecision::exact_f32);  // the scope restored the default
  expect_within(kernels::linear(x, w_bf16, b), ref_widened.y, ref_widened.bound);
  expect_within(exact_f32_weight, ref_f32.y, ref_f32.bound);
}

TEST(Linear, IntoWritesAPreallocatedOutputAndReadsViews) {
  Tensor x = random_tensor({4, 2, 33}, 7), w = random_tensor({9, 33}, 8), b = random_tensor({9}, 9);
  Tensor out = Tensor::full({4, 2, 9}, 123.0);
  kernels::linear_into(x, w, b, out);
  EXPECT_EQ(max_abs_diff(out, kernels::linear(x, w, b)), 0.0);
  // A non-contiguous x (every other row) is copied, not misread.
  Tensor rows = x.reshape({8, 33}).narrow(0, 2, 3);
  Tensor y = kernels::linear(rows, w, b);
  auto ref = reference_linear(rows.contiguous(), w, b);
  expect_within(y, ref.y, ref.bound);
}

// linear_cat multiplies each part by its own columns of W into one output, never building the
// concatenation: against the float64 product of the concatenation (f32 accumulation bound), for
// parts of odd widths, an empty part, a view, with and without bias; bf16-compute and block-quantised
// weights (which run on the concatenation) equal linear on it bit for bit.
TEST(Linear, CatMultipliesEachPartByItsColumnsOfTheWeight) {
  Tensor a = random_tensor({2, 5, 33}, 600), c = random_tensor({2, 5, 130}, 601);
  Tensor view = random_tensor({2, 5, 40}, 602).narrow(2, 3, 17);  // not contiguous: read, not misread
  Tensor empty = Tensor::empty({2, 5, 0});
  Tensor w = random_tensor({29, 33 + 130 + 17}, 603), b = random_tensor({29}, 604);
  const std::vector<Tensor> parts{a, c, empty, view};
  const Tensor joined = cat(parts, -1);
  for (const Tensor& bias : {Tensor(), b}) {
    SCOPED_TRACE(bias.defined() ? "with bias" : "no bias");
    const Tensor y = kernels::linear_cat(parts, w, bias);
    EXPECT_EQ(y.shape(), (Shape{2, 5, 29}));
    const auto ref = reference_linear(joined, w, bias);
    expect_within(y, ref.y, ref.bound);
    const auto ref_widened = reference_linear(joined, bf16_rounded(w), bias);
    expect_within(kernels::linear_cat(parts, w.to(DType::bf16), bias), ref_widened.y, ref_widened.bound);
  }
  {
    ScopedMatmulPrecision precision(MatmulPrecision::bf16);
    const Tensor w_bf16 = w.to(DType::bf16);
    EXPECT_EQ(max_abs_diff(kernels::linear_cat(parts, w_bf16, b), kernels::linear(joined, w_bf16, b)), 0.0);
  }
  const Weight q8 = kernels::quantise(random_tensor({3, 64}, 605), "Q8_0");
  const std::vector<Tensor> halves{random_tensor({4, 32}, 606), random_tensor({4, 32}, 607)};
  EXPECT_EQ(max_abs_diff(kernels::linear_cat(halves, q8), kernels::linear(cat(halves, -1), q8)), 0.0);
}

TEST(Linear, CatRejectsPartsThatDoNotLineUp) {
  Tensor a = random_tensor({3, 8}, 1), w = random_tensor({4, 12}, 2);
  EXPECT_THROW(kernels::linear_cat({}, w), Error);
  EXPECT_THROW(kernels::linear_cat({a, random_tensor({3, 3}, 3)}, w), Error);          // 11 features, not 12
  EXPECT_THROW(kernels::linear_cat({a, random_tensor({2, 4}, 4)}, w), Error);          // rows differ
  EXPECT_THROW(kernels::linear_cat({a, random_tensor({1, 3, 4}, 5)}, w), Error);       // dims differ
  EXPECT_THROW(kernels::linear_cat({a, random_tensor({3, 4}, 6).to(DType::bf16)}, w), Error);
  EXPECT_THROW(kernels::linear_cat({a, random_tensor({3, 4}, 7)}, w, random_tensor({5}, 8)), Error);
}

TEST(Linear, RejectsMismatchedShapesAndDtypes) {
  Tensor x = random_tensor({3, 8}, 1), w = random_tensor({4, 8}, 2);
  EXPECT_THROW(kernels::linear(x, random_tensor({4, 7}, 3)), Error);
  EXPECT_THROW(kernels::linear(x, w, random_tensor({5}, 4)), Error);
  EXPECT_THROW(kernels::linear(x, random_tensor({32}, 5)), Error);
  EXPECT_THROW(kernels::linear(x.to(DType::bf16), w), Error);
  Tensor wrong_out = Tensor::empty({3, 5});
  EXPECT_THROW(kernels::linear_into(x, w, {}, wrong_out), Error);
}

// oneDNN may split the sum over k differently per thread count, so results agree to rounding.
TEST(Linear, OneAndTwoThreadsAgree) {
  Tensor x = random_tensor({67, 129}, 11), w = random_tensor({47, 129}, 12), b = random_tensor({47}, 13);
  Tensor w_bf16 = w.to(DType::bf16);
  auto ref = reference_linear(x, bf16_rounded(w), b);
  auto ref_bf16 = reference_linear(bf16_rounded(x), bf16_rounded(w), b);
  for (int threads : {1, 2}) {
    ScopedComputeThreads budget(threads);
    SCOPED_TRACE(std::to_string(threads) + " threads");
    expect_within(kernels::linear(x, w_bf16, b), ref.y, ref.bound);
    expect_within(kernels::linear_bf16_compute(x, w_bf16, b), ref_bf16.y, ref_bf16.bound);
  }
}

TEST(Gemm, AllTranspositionsWithAlphaBetaAndPaddedRows) {
  const int64_t m = 5, n = 7, k = 9, pad = 3;
  uint32_t seed = 50;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE(std::string("trans_a=") + (ta ? "1" : "0") + " trans_b=" + (tb ? "1" : "0"));
      // Stored shapes: A is (m, k) or (k, m); B is (k, n) or (n, k); each row padded by `pad`.
      const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
      Tensor a = random_tensor({a_rows, a_cols + pad}, seed++), b = random_tensor({b_rows, b_cols + pad}, seed++);
      Tensor c = random_tensor({m, n + pad}, seed++);
      auto av = to_double(a), bv = to_double(b), cv = to_double(c);
      const float alpha = 0.5f, beta = -1.5f;
      std::vector<double> want(size_t(m * n)), bound(size_t(m * n));
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0, magnitude = 0;
          for (int64_t l = 0; l < k; ++l) {
            double ail = ta ? av[size_t(l * (a_cols + pad) + i)] : av[size_t(i * (a_cols + pad) + l)];
            double blj = tb ? bv[size_t(j * (b_cols + pad) + l)] : bv[size_t(l * (b_cols + pad) + j)];
            sum += ail * blj;
            magnitude += std::abs(ail * blj);
          }
          double old = cv[size_t(i * (n + pad) + j)];
          want[size_t(i * n + j)] = alpha * sum + beta * old;
          bound[size_t(i * n + j)] = 1e-5 * (alpha * magnitude + std::abs(beta * old));
        }
      kernels::gemm(ta, tb, m, n, k, alpha, a.data<float>(), a_cols + pad, b.data<float>(), b_cols + pad, beta,
                    c.data<float>(), n + pad);
      expect_within(c.narrow(1, 0, n).contiguous(), want, bound);
    }
}

TEST(Gemm, RejectsImpossibleLeadingDimensions) {
  std::vector<float> a(16), b(16), c(16);
  EXPECT_THROW(kernels::gemm(false, false, 4, 4, 4, 1.0f, a.data(), 2, b.data(), 4, 0.0f, c.data(), 4), Error);
}

// The GELU epilogue (tanh form) is gelu of the product each path gives without it: against the same
// Linear followed by bias_gelu_, on every path a Linear takes (the f32 sgemm; under bf16 precision the
// AMX tiles and the bf16 product below them; a Q8_0 weight on each), on shapes with tails in every
// dimension of the AMX tiles. The two sides differ only in where the bias joins the f32 sum (each
// within reference_linear's bound of the exact sum, so within twice it of each other) and GELU's slope
// is at most 1.13; 1e-6 relative covers the vectorised GELU's rounding of a few ulps.
TEST(Linear, GeluTanhEpilogueEqualsLinearThenBiasGeluOnEveryPath) {
  const LinearShape shapes[] = {{{1, 64}, 17}, {{31, 95}, 33}, {{2, 37, 96}, 70}, {{65, 128}, 96}};
  uint32_t seed = 700;
  for (const auto& s : shapes) {
    const int64_t k = s.x.back();
    Tensor x = random_tensor(s.x, seed++), w = random_tensor({s.out, k}, seed++), b = random_tensor({s.out}, seed++);
    const std::vector<double> sum_bound = reference_linear(x, w, b).bound;
    std::vector<Weight> weights{w.to(DType::bf16)};
    if (k % 32 == 0) weights.push_back(kernels::quantise(w, "Q8_0"));
    for (const MatmulPrecision precision : {MatmulPrecision::exact_f32, MatmulPrecision::bf16})
      for (const kernels::Isa isa : {kernels::Isa::avx512_bf16, kernels::Isa::amx})
        for (const Weight& weight : weights) {
          const ScopedMatmulPrecision scoped_precision(precision);
          const kernels::ScopedKernelIsa level(isa);
          SCOPED_TRACE(shape_string(s.x) + " -> " + std::to_string(s.out) + ", " + weight.describe() + ", " +
                       kernels::isa_name(kernels::kernel_isa()) +
                       (precision == MatmulPrecision::bf16 ? ", bf16" : ", exact f32"));
          Tensor unfused = kernels::linear(x, weight);
          kernels::bias_gelu_(unfused, b, /*tanh_approx=*/true);
          const Tensor fused = kernels::linear(x, weight, b, kernels::Epilogue::gelu_tanh);
          const std::vector<double> expected = to_double(unfused);
          std::vector<double> bound(expected.size());
          for (size_t i = 0; i < bound.size(); ++i) bound[i] = 2 * 1.13 * sum_bound[i] + 1e-6 * std::abs(expected[i]);
          expect_within(fused, expected, bound);
        }
  }
}
