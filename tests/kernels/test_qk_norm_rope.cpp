#include "kernels/reference.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>

#include <gtest/gtest.h>

using namespace cpdit;
using cpdit::test::expect_close;
using cpdit::test::random_tensor;
using cpdit::test::to_double;

namespace {

constexpr float kEps = 1e-5f;

// rope(rms_norm(x + bias, weight), cos, sin) over whole rows, in double.
std::vector<double> reference(const Tensor& x, const Tensor& bias, const Tensor& weight, const Tensor& cos,
                              const Tensor& sin) {
  auto v = to_double(x);
  const auto b = to_double(bias), w = to_double(weight), cv = to_double(cos), sv = to_double(sin);
  const size_t c = size_t(x.size(2)), seq = size_t(x.size(1));
  for (size_t r = 0; r < v.size() / c; ++r) {
    double* row = v.data() + r * c;
    double squares = 0;
    for (size_t j = 0; j < c; ++j) {
      row[j] += b[j];
      squares += row[j] * row[j] / double(c);
    }
    for (size_t j = 0; j < c; ++j) row[j] = row[j] / std::sqrt(squares + double(kEps)) * w[j];
    const size_t t = (r % seq) * c;
    for (size_t i = 0; i < c; i += 2) {
      const double even = row[i], odd = row[i + 1];
      row[i] = even * cv[t + i] - odd * sv[t + i];
      row[i + 1] = odd * cv[t + i + 1] + even * sv[t + i + 1];
    }
  }
  return v;
}

// Angles of a whole-width table (LTX-Video's layout: each value repeated for its pair).
std::pair<Tensor, Tensor> tables(int64_t seq, int64_t c) {
  std::vector<float> cs(size_t(seq * c)), sn(size_t(seq * c));
  for (int64_t s = 0; s < seq; ++s)
    for (int64_t i = 0; i < c; i += 2) {
      const double angle = 0.37 * double(s + 1) * double(i + 1) / double(c);
      cs[size_t(s * c + i)] = cs[size_t(s * c + i + 1)] = float(std::cos(angle));
      sn[size_t(s * c + i)] = sn[size_t(s * c + i + 1)] = float(std::sin(angle));
    }
  return {Tensor::from_vector(cs, {seq, c}), Tensor::from_vector(sn, {seq, c})};
}

}  // namespace

TEST(BiasRmsNormRope, MatchesDoubleReferenceAndTheThreeKernelsItReplaces) {
  const int64_t B = 2, S = 5, C = 96;
  const Tensor x = random_tensor({B, S, C}, 1, -3.0f, 3.0f), bias = random_tensor({C}, 2);
  const Tensor weight = random_tensor({C}, 3, 0.5f, 1.5f);
  auto [cos, sin] = tables(S, C);
  Tensor y = x.clone();
  kernels::bias_rms_norm_rope_(y, bias, weight, kEps, cos, sin);
  // f32 rounding of a sum of squares over 96 values and a few products per element.
  expect_close(y, reference(x, bias, weight, cos, sin), 1e-5, 1e-6);
  // add, rms_norm, rope: the same operations in the same order; only where the compiler fuses a
  // multiply-add may differ, by an ulp or so.
  const Tensor normed = kernels::rms_norm(kernels::add(x, bias), weight, kEps);
  const Tensor three = kernels::rope(normed.reshape({B, S, 1, C}), cos, sin).reshape({B, S, C});
  expect_close(y, to_double(three), 1e-6, 1e-6);
}

TEST(BiasRmsNormRope, WithoutTablesOrBiasItIsTheNormAlone) {
  const Tensor x = random_tensor({1, 4, 64}, 4), weight = random_tensor({64}, 5);
  Tensor y = x.clone();
  kernels::bias_rms_norm_rope_(y, {}, weight, kEps, {}, {});
  expect_close(y, to_double(kernels::rms_norm(x, weight, kEps)), 1e-6, 1e-6);  // as above
}

TEST(BiasRmsNormRope, PerHeadNormAndRotationMatchTheKernelsItReplaces) {
  // FLUX.1's tail: a norm of each head of Dh values with one shared weight, then each head rotated by
  // the same (S, Dh) tables; the row as heads (B, S, H, Dh) for rms_norm and rope.
  const int64_t B = 2, S = 5, H = 3, Dh = 32;
  const Tensor x = random_tensor({B, S, H * Dh}, 6, -3.0f, 3.0f), bias = random_tensor({H * Dh}, 7);
  const Tensor weight = random_tensor({Dh}, 8, 0.5f, 1.5f);
  auto [cos, sin] = tables(S, Dh);
  Tensor y = x.clone();
  kernels::bias_rms_norm_rope_(y, bias, weight, kEps, cos, sin);
  const Tensor heads = kernels::add(x, bias).reshape({B, S, H, Dh});
  const Tensor three = kernels::rope(kernels::rms_norm(heads, weight, kEps), cos, sin).reshape({B, S, H * Dh});
  expect_close(y, to_double(three), 1e-6, 1e-6);  // the same operations in the same order, as above
  // A norm across the heads with per-head tables (Wan's layout) rotates every head alike.
  Tensor wide = x.clone();
  kernels::bias_rms_norm_rope_(wide, {}, {}, kEps, cos, sin);
  const Tensor normed = kernels::rms_norm(x, {}, kEps).reshape({B, S, H, Dh});
  expect_close(wide, to_double(kernels::rope(normed, cos, sin).reshape({B, S, H * Dh})), 1e-6, 1e-6);
}

TEST(BiasRmsNormRope, RejectsWrongShapes) {
  auto [cos, sin] = tables(4, 8);
  Tensor odd = random_tensor({1, 4, 7}, 1), ok = random_tensor({1, 4, 8}, 1), long_seq = random_tensor({1, 5, 8}, 1);
  EXPECT_THROW(kernels::bias_rms_norm_rope_(odd, {}, {}, kEps, random_tensor({4, 7}, 4), random_tensor({4, 7}, 5)),
               Error);
  EXPECT_THROW(kernels::bias_rms_norm_rope_(long_seq, {}, {}, kEps, cos, sin), Error);
  EXPECT_THROW(kernels::bias_rms_norm_rope_(ok, random_tensor({7}, 2), {}, kEps, cos, sin), Error);
  EXPECT_THROW(kernels::bias_rms_norm_rope_(ok, {}, {}, kEps, cos, {}), Error);
  EXPECT_THROW(kernels::bias_rms_norm_rope_(ok, {}, random_tensor({3}, 2), kEps, {}, {}), Error);  // 3 ∤ 8
  auto [narrow_cos, narrow_sin] = tables(4, 6);  // 6 ∤ 8
  EXPECT_THROW(kernels::bias_rms_norm_rope_(ok, {}, {}, kEps, narrow_cos, narrow_sin), Error);
  Tensor four_d = random_tensor({1, 4, 2, 4}, 3);
  EXPECT_THROW(kernels::bias_rms_norm_rope_(four_d, {}, {}, kEps, cos, sin), Error);
}
