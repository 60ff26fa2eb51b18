#include "kernels/reference.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>

#include <gtest/gtest.h>

#include <limits>

using namespace cpdit;
using cpdit::test::expect_close;
using cpdit::test::random_tensor;
using cpdit::test::to_double;

namespace {

std::vector<double> apply(const Tensor& x, double (*fn)(double)) {
  auto v = to_double(x);
  for (double& e : v) e = fn(e);
  return v;
}

// Values spanning the range where the exp-based forms switch regime, plus saturated tails.
Tensor wide_inputs() {
  std::vector<float> v;
  for (int i = -2000; i <= 2000; ++i) v.push_back(float(i) * 0.01f);  // -20 .. 20
  for (float e : {-1e4f, -100.0f, -88.5f, 88.5f, 100.0f, 1e4f}) v.push_back(e);
  return Tensor::from_vector(v, {int64_t(v.size())});
}

}  // namespace

TEST(Gelu, TanhApproximationMatchesDoubleReference) {
  for (const Tensor& x : {wide_inputs(), random_tensor({5, 257}, 1, -6.0f, 6.0f)}) {
    auto want = apply(x, [](double v) {
      return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    });
    expect_close(kernels::gelu(x, true), want, 1e-5, 1e-6);
  }
}

TEST(Gelu, ExactFormMatchesDoubleReference) {
  Tensor x = wide_inputs();
  auto want = apply(x, [](double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); });
  expect_close(kernels::gelu(x, false), want, 1e-5, 1e-6);
}

TEST(BiasGelu, AddsTheBiasThenAppliesGeluInPlace) {
  const int64_t rows = 6, c = 300;
  const Tensor x = random_tensor({2, rows / 2, c}, 2, -6.0f, 6.0f), bias = random_tensor({c}, 3);
  for (bool tanh_approx : {true, false}) {
    SCOPED_TRACE(tanh_approx ? "tanh" : "erf");
    Tensor y = x.clone();
    kernels::bias_gelu_(y, bias, tanh_approx);
    // The one pass does what the two kernels do, in the same order (an ulp where a multiply-add fuses).
    expect_close(y, to_double(kernels::gelu(kernels::add(x, bias), tanh_approx)), 1e-6, 1e-6);
    Tensor unbiased = x.clone();
    kernels::bias_gelu_(unbiased, {}, tanh_approx);
    expect_close(unbiased, to_double(kernels::gelu(x, tanh_approx)), 1e-6, 1e-6);
  }
  Tensor y = x.clone();
  EXPECT_THROW(kernels::bias_gelu_(y, random_tensor({c + 1}, 4), true), Error);
  Tensor view = x.narrow(2, 0, c / 2);
  EXPECT_THROW(kernels::bias_gelu_(view, {}, true), Error);  // in place needs contiguous rows
}

TEST(Silu, MatchesDoubleReference) {
  for (const Tensor& x : {wide_inputs(), random_tensor({33, 7}, 2, -10.0f, 10.0f)}) {
    auto want = apply(x, [](double v) { return v / (1.0 + std::exp(-v)); });
    expect_close(kernels::silu(x), want, 1e-5, 1e-6);
  }
}

TEST(QuickGelu, MatchesDoubleReference) {
  for (const Tensor& x : {wide_inputs(), random_tensor({33, 7}, 4, -10.0f, 10.0f)}) {
    auto want = apply(x, [](double v) { return v / (1.0 + std::exp(-1.702 * v)); });
    expect_close(kernels::quick_gelu(x), want, 1e-5, 1e-6);  // the bounds of the SiLU test: same exp
  }
}

TEST(Softmax, MatchesDoubleReferenceOnLargeAndMaskedRows) {
  Tensor x = random_tensor({6, 257}, 3, -30.0f, 30.0f);
  // Row 1 holds -inf entries (masked keys): they must come out exactly 0.
  float* p = x.data<float>();
  for (int j = 0; j < 257; j += 3) p[257 + j] = -std::numeric_limits<float>::infinity();
  auto v = to_double(x);
  for (size_t r = 0; r < 6; ++r) {
    double* row = v.data() + r * 257;
    double max = *std::max_element(row, row + 257), sum = 0;
    for (int j = 0; j < 257; ++j) sum += row[j] = std::exp(row[j] - max);
    for (int j = 0; j < 257; ++j) row[j] /= sum;
  }
  Tensor y = kernels::softmax(x);
  expect_close(y, v, 1e-5, 1e-12);
  EXPECT_EQ(y.data<float>()[257], 0.0f);
}

TEST(Softmax, OneElementRowsAreOne) {
  Tensor y = kernels::softmax(random_tensor({4, 1}, 4));
  expect_close(y, std::vector<double>(4, 1.0), 0.0, 0.0);
}
