// combine_guidance against a float64 evaluation of the formulas, the norm rescale's defining property,
// and shards: the combine is token-wise, so a rank may combine its own share of the tokens.
#include <cpdit/core/error.hpp>
#include <cpdit/pipeline/guidance.hpp>
#include <cpdit/pipeline/random.hpp>

#include <gtest/gtest.h>

#include <cmath>

using namespace cpdit;
using pipeline::combine_guidance;

namespace {

// (B, tokens, channels) = (2, 7, 64), the packed-latent layout the pipelines combine. Made on first
// use: the allocator is not ready during static initialisation.
struct Predictions {
  Tensor cond = pipeline::randn({2, 7, 64}, 1), uncond = pipeline::randn({2, 7, 64}, 2);
};
const Predictions& predictions() {
  static const Predictions p;
  return p;
}

}  // namespace

// 3 f32 roundings of values of order scale·|cond − uncond| ≈ 20: within 4 ulp of 20, about 1e-5.
TEST(Guidance, CombineIsUncondPlusScaledDifference) {
  const Tensor &kCond = predictions().cond, &kUncond = predictions().uncond;
  const float scale = 4.0f;
  const Tensor out = combine_guidance(kCond, kUncond, {scale});
  const float *c = kCond.data<float>(), *u = kUncond.data<float>(), *o = out.data<float>();
  for (int64_t i = 0; i < out.numel(); ++i)
    ASSERT_NEAR(o[i], double(u[i]) + scale * (double(c[i]) - double(u[i])), 1e-5) << i;
  // Scale 1 is the conditional prediction itself (up to the rounding of c − u + u).
  const Tensor same = combine_guidance(kCond, kUncond, {1.0f});
  EXPECT_LT(max_abs_diff(same, kCond), 1e-6);
}

// Qwen-Image: every token of the result has the conditional prediction's norm and the direction of
// the plain combine. 64 channels of f32 values: relative error a few 1e-7, so 1e-5 relative.
TEST(Guidance, NormRescaleKeepsTheConditionalNorm) {
  const Tensor &kCond = predictions().cond, &kUncond = predictions().uncond;
  const Tensor plain = combine_guidance(kCond, kUncond, {4.0f});
  const Tensor out = combine_guidance(kCond, kUncond, {4.0f, true});
  const int64_t channels = 64, rows = out.numel() / channels;
  for (int64_t r = 0; r < rows; ++r) {
    double cond_norm = 0, plain_norm = 0, out_norm = 0;
    for (int64_t i = 0; i < channels; ++i) {
      const int64_t k = r * channels + i;
      cond_norm += std::pow(double(kCond.data<float>()[k]), 2);
      plain_norm += std::pow(double(plain.data<float>()[k]), 2);
      out_norm += std::pow(double(out.data<float>()[k]), 2);
    }
    cond_norm = std::sqrt(cond_norm), plain_norm = std::sqrt(plain_norm), out_norm = std::sqrt(out_norm);
    EXPECT_NEAR(out_norm, cond_norm, 1e-5 * cond_norm) << r;
    for (int64_t i = 0; i < channels; ++i) {
      const int64_t k = r * channels + i;
      ASSERT_NEAR(out.data<float>()[k], plain.data<float>()[k] * cond_norm / plain_norm, 1e-5 * cond_norm) << k;
    }
  }
}

TEST(Guidance, CombineOnShardsEqualsShardsOfCombine) {
  const Tensor &kCond = predictions().cond, &kUncond = predictions().uncond;
  for (bool rescale : {false, true}) {
    const Tensor full = combine_guidance(kCond, kUncond, {4.0f, rescale});
    const auto cs = split(kCond, 1, 3), us = split(kUncond, 1, 3), fulls = split(full, 1, 3);  // 7 over 3: uneven
    for (size_t r = 0; r < cs.size(); ++r)
      EXPECT_EQ(max_abs_diff(combine_guidance(cs[r].contiguous(), us[r].contiguous(), {4.0f, rescale}), fulls[r]), 0.0);
  }
}

TEST(Guidance, ZeroTokenStaysZeroAndShapesMustMatch) {
  const Tensor zero = Tensor::zeros({1, 2, 8});
  const Tensor out = combine_guidance(zero, zero, {4.0f, true});
  for (int64_t i = 0; i < out.numel(); ++i) EXPECT_EQ(out.data<float>()[i], 0.0f);
  EXPECT_THROW(combine_guidance(Tensor::zeros({1, 2, 8}), Tensor::zeros({1, 3, 8}), {4.0f}), Error);
}
