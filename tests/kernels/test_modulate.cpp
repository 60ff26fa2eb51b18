#include "kernels/reference.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>

#include <gtest/gtest.h>

using namespace cpdit;
using cpdit::test::expect_close;
using cpdit::test::random_tensor;
using cpdit::test::to_double;

namespace {

// x (1 + scale) + shift in double; `per_token` scale/shift are (B, S, C), otherwise (B, C).
std::vector<double> reference_modulate(const std::vector<double>& x, const Tensor& scale, const Tensor& shift,
                                       int64_t b, int64_t s, int64_t c, bool per_token) {
  auto sc = to_double(scale), sh = to_double(shift);
  std::vector<double> out(x.size());
  for (int64_t i = 0; i < b * s * c; ++i) {
    const int64_t row = i / c, j = i % c;
    const size_t m = size_t((per_token ? row : row / s) * c + j);
    out[size_t(i)] = x[size_t(i)] * (1.0 + sc[m]) + sh[m];
  }
  return out;
}

std::vector<double> reference_layer_norm(const Tensor& x) {
  auto v = to_double(x);
  const size_t c = size_t(x.size(-1));
  for (size_t r = 0; r < v.size() / c; ++r) {
    double* row = v.data() + r * c;
    double mean = 0, var = 0;
    for (size_t j = 0; j < c; ++j) mean += row[j] / double(c);
    for (size_t j = 0; j < c; ++j) var += (row[j] - mean) * (row[j] - mean) / double(c);
    for (size_t j = 0; j < c; ++j) row[j] = (row[j] - mean) / std::sqrt(var + 1e-6);
  }
  return v;
}

std::vector<double> reference_rms_norm(const Tensor& x, double eps) {
  auto v = to_double(x);
  const size_t c = size_t(x.size(-1));
  for (size_t r = 0; r < v.size() / c; ++r) {
    double* row = v.data() + r * c;
    double squares = 0;
    for (size_t j = 0; j < c; ++j) squares += row[j] * row[j] / double(c);
    for (size_t j = 0; j < c; ++j) row[j] /= std::sqrt(squares + eps);
  }
  return v;
}

}  // namespace

TEST(Modulate, PerBatchAndPerTokenScaleShift) {
  const int64_t B = 2, S = 7, C = 257;
  Tensor x = random_tensor({B, S, C}, 1);
  Tensor scale = random_tensor({B, C}, 2), shift = random_tensor({B, C}, 3);
  auto want = reference_modulate(to_double(x), scale, shift, B, S, C, false);
  expect_close(kernels::modulate(x, scale, shift), want, 1e-6, 1e-6);
  expect_close(kernels::modulate(x, scale.reshape({B, 1, C}), shift.reshape({B, 1, C})), want, 1e-6, 1e-6);
  Tensor token_scale = random_tensor({B, S, C}, 4), token_shift = random_tensor({B, S, C}, 5);
  expect_close(kernels::modulate(x, token_scale, token_shift),
               reference_modulate(to_double(x), token_scale, token_shift, B, S, C, true), 1e-6, 1e-6);
}

TEST(Modulate, ChunkViewsOfAModulationTableAreAccepted) {
  // Wan's chunk6 of (B, 6, C): each chunk is a non-contiguous (B, 1, C) view.
  const int64_t B = 2, S = 3, C = 33;
  Tensor table = random_tensor({B, 6, C}, 6), x = random_tensor({B, S, C}, 7);
  Tensor scale = table.narrow(1, 1, 1), shift = table.narrow(1, 0, 1);
  auto want = reference_modulate(to_double(x), scale.contiguous(), shift.contiguous(), B, S, C, false);
  expect_close(kernels::modulate(x, scale, shift), want, 1e-6, 1e-6);
}

TEST(LayerNormModulate, EqualsLayerNormThenModulate) {
  const int64_t B = 2, S = 5, C = 3072;
  Tensor x = random_tensor({B, S, C}, 8, -1.0f, 3.0f);
  Tensor scale = random_tensor({B, C}, 9), shift = random_tensor({B, C}, 10);
  auto want = reference_modulate(reference_layer_norm(x), scale, shift, B, S, C, false);
  expect_close(kernels::layer_norm_modulate(x, scale, shift, 1e-6f), want, 1e-5, 1e-5);
  Tensor token_scale = random_tensor({B, S, C}, 11), token_shift = random_tensor({B, S, C}, 12);
  expect_close(kernels::layer_norm_modulate(x, token_scale, token_shift, 1e-6f),
               reference_modulate(reference_layer_norm(x), token_scale, token_shift, B, S, C, true), 1e-5, 1e-5);
}

TEST(RmsNormModulate, EqualsRmsNormThenModulate) {
  const int64_t B = 2, S = 5, C = 2048;
  Tensor x = random_tensor({B, S, C}, 13, -1.0f, 3.0f);
  Tensor scale = random_tensor({B, C}, 14), shift = random_tensor({B, C}, 15);
  // f32 rounding of the norm and the modulation (a few ulps), against the double reference.
  expect_close(kernels::rms_norm_modulate(x, scale, shift, 1e-6f),
               reference_modulate(reference_rms_norm(x, 1e-6), scale, shift, B, S, C, false), 1e-5, 1e-5);
  Tensor token_scale = random_tensor({B, S, C}, 16), token_shift = random_tensor({B, S, C}, 17);
  const Tensor fused = kernels::rms_norm_modulate(x, token_scale, token_shift, 1e-6f);
  expect_close(fused, reference_modulate(reference_rms_norm(x, 1e-6), token_scale, token_shift, B, S, C, true), 1e-5,
               1e-5);
  // The same arithmetic as the two kernels it replaces, term for term (an ulp where a multiply-add fuses).
  const Tensor two_passes = kernels::modulate(kernels::rms_norm(x, {}, 1e-6f), token_scale, token_shift);
  expect_close(fused, to_double(two_passes), 1e-6, 1e-6);
}

TEST(Modulate, RejectsMismatchedScaleShift) {
  Tensor x = random_tensor({2, 3, 8}, 1);
  EXPECT_THROW(kernels::modulate(x, random_tensor({2, 7}, 2), random_tensor({2, 8}, 3)), Error);
  EXPECT_THROW(kernels::modulate(x, random_tensor({2, 3, 8}, 2), random_tensor({2, 8}, 3)), Error);
  EXPECT_THROW(kernels::modulate(random_tensor({6, 8}, 4), random_tensor({2, 8}, 2), random_tensor({2, 8}, 3)),
               Error);
  EXPECT_THROW(kernels::rms_norm_modulate(x, random_tensor({2, 7}, 2), random_tensor({2, 8}, 3), 1e-6f), Error);
}
