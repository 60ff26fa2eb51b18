// --cache's specs as nn::parse_step_cache reads them (diffusers' defaults where a setting is left out),
// and MagCache's ratios resampled to a run's steps by diffusers' nearest_interp rule.
#include "support/expect_error.hpp"

#include <cpdit/nn/step_cache.hpp>

#include <gtest/gtest.h>

namespace cpdit::nn {
namespace {

TEST(StepCacheSpec, FirstBlockCacheTakesItsThresholdOrDiffusersDefault) {
  EXPECT_EQ(parse_step_cache("fbcache").kind, StepCacheConfig::Kind::first_block);
  EXPECT_EQ(parse_step_cache("fbcache").threshold, 0.05);  // FirstBlockCacheConfig's default
  EXPECT_EQ(parse_step_cache("fbcache:0.08").threshold, 0.08);
  EXPECT_EQ(parse_step_cache("fbcache:threshold=0.2").threshold, 0.2);
  EXPECT_EQ(parse_step_cache("none").kind, StepCacheConfig::Kind::none);
}

TEST(StepCacheSpec, MagCacheTakesEachSettingOrDiffusersDefault) {
  const StepCacheConfig d = parse_step_cache("magcache");
  EXPECT_EQ(d.kind, StepCacheConfig::Kind::mag);
  EXPECT_EQ(d.threshold, 0.06);  // MagCacheConfig's defaults
  EXPECT_EQ(d.max_skip_steps, 3);
  EXPECT_EQ(d.retention_ratio, 0.2);
  EXPECT_FALSE(d.calibrate);
  EXPECT_TRUE(d.mag_ratios.empty());
  const StepCacheConfig c = parse_step_cache("magcache:0.1,max_skip_steps=2,retention_ratio=0.5,ratios=1/1.25/0.5");
  EXPECT_EQ(c.threshold, 0.1);
  EXPECT_EQ(c.max_skip_steps, 2);
  EXPECT_EQ(c.retention_ratio, 0.5);
  EXPECT_EQ(c.mag_ratios, (std::vector<float>{1.0f, 1.25f, 0.5f}));
  EXPECT_TRUE(parse_step_cache("magcache:calibrate").calibrate);
  // The name the summary prints reads back as the same cache.
  EXPECT_EQ(parse_step_cache(step_cache_name(c)).threshold, c.threshold);
  EXPECT_EQ(step_cache_name(parse_step_cache("magcache:calibrate")), "magcache:calibrate");
}

TEST(StepCacheSpec, TaylorSeerTakesEachSettingOrDiffusersDefault) {
  const StepCacheConfig d = parse_step_cache("taylorseer");
  EXPECT_EQ(d.kind, StepCacheConfig::Kind::taylor_seer);
  EXPECT_EQ(d.cache_interval, 5);  // TaylorSeerCacheConfig's defaults
  EXPECT_EQ(d.disable_cache_before_step, 3);
  EXPECT_EQ(d.disable_cache_after_step, -1);
  EXPECT_EQ(d.max_order, 1);
  EXPECT_FALSE(d.f32_factors);
  EXPECT_TRUE(d.modules.empty());  // the family's
  const StepCacheConfig c =
      parse_step_cache("taylorseer:interval=2,before=1,after=6,order=2,factors=f32,module=^blocks\\.0\\.attn1$,"
                       "module=x=y");
  EXPECT_EQ(c.cache_interval, 2);
  EXPECT_EQ(c.disable_cache_before_step, 1);
  EXPECT_EQ(c.disable_cache_after_step, 6);
  EXPECT_EQ(c.max_order, 2);
  EXPECT_TRUE(c.f32_factors);
  EXPECT_EQ(c.modules, (std::vector<std::string>{"^blocks\\.0\\.attn1$", "x=y"}));
  // The name the summary prints reads back as the same cache.
  const StepCacheConfig back = parse_step_cache(step_cache_name(c));
  EXPECT_EQ(back.cache_interval, 2);
  EXPECT_EQ(back.disable_cache_after_step, 6);
  EXPECT_EQ(back.modules, c.modules);
  EXPECT_EQ(step_cache_name(d), "taylorseer:interval=5,before=3,order=1");
}

TEST(StepCacheSpec, BadSpecsNameWhatIsWrong) {
  testing::expect_error([] { parse_step_cache("taylorseer:interval=0"); }, {"interval must be a whole number >= 1"});
  testing::expect_error([] { parse_step_cache("taylorseer:order=1.5"); }, {"order must be a whole number >= 0"});
  testing::expect_error([] { parse_step_cache("taylorseer:factors=f16"); }, {"bf16 or f32, got 'f16'"});
  testing::expect_error([] { parse_step_cache("taylorseer:0.1"); }, {"'0.1' is not a setting of taylorseer"});
  testing::expect_error([] { parse_step_cache("taylorseer:threshold=0.1"); }, {"is not a setting of taylorseer"});
  testing::expect_error([] { parse_step_cache("teacache"); }, {"unknown kind 'teacache'"});
  testing::expect_error([] { parse_step_cache("fbcache:"); }, {"got ''"});
  testing::expect_error([] { parse_step_cache("fbcache:nan"); }, {"a number >= 0"});
  testing::expect_error([] { parse_step_cache("fbcache:1e400"); }, {"a number >= 0"});
  testing::expect_error([] { parse_step_cache("none:1"); }, {"unknown kind 'none'"});
}

TEST(StepCacheSpec, NearestInterpKeepsALengthAndResamplesAnother) {
  const std::vector<float> ratios{1.0f, 2.0f, 3.0f, 4.0f, 5.0f};
  EXPECT_EQ(nearest_interp(ratios, 5), ratios);
  EXPECT_EQ(nearest_interp(ratios, 1), std::vector<float>{5.0f});  // diffusers keeps the last
  // 3 steps over 5 values: positions 0, 2, 4 exactly.
  EXPECT_EQ(nearest_interp(ratios, 3), (std::vector<float>{1.0f, 3.0f, 5.0f}));
  // 9 steps over 5 values: positions i/2, the halves rounded to even as torch.round does.
  EXPECT_EQ(nearest_interp(ratios, 9), (std::vector<float>{1, 1, 2, 3, 3, 3, 4, 5, 5}));
  testing::expect_error([] { nearest_interp({}, 4); }, {"cannot be resampled"});
}

}  // namespace
}  // namespace cpdit::nn
