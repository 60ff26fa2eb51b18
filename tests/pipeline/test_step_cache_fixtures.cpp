// Step caches against diffusers' own hooks (tests/data/fixtures/cache_flux_tiny, cache_wan_tiny): on one
// rank, each FirstBlockCache and MagCache case of the fixtures takes diffusers' decision at every
// transformer call (Wan: the conditional and unconditional passes, each with its own cache state), its
// decision values are diffusers' (TaylorSeer: the attentions each call ran), and its final latents are
// within 1e-4 of diffusers'; MagCache's
// calibration reports diffusers' ratios and changes nothing, and FLUX.1's default ratios are diffusers'
// FLUX_MAG_RATIOS.
#include "pipeline/cache_case.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace cpdit::pipeline {
namespace {

using cpdit::testing::CacheFixture;
using cpdit::testing::compact_pattern;
using cpdit::testing::in_fixture_layout;

// diffusers' float32 run and ours differ in summation order only; with the same skips the fixtures'
// other pipeline runs land within 1e-5 (tests/pipeline/test_pipeline_parity.cpp), and a skip reuses a
// residual with the same rounding. 1e-4, as the parity tests' bound.
constexpr double kLatentsTolerance = 1e-4;
// A decision value is a quotient of two means over every element: the residuals' 1e-6-level rounding
// differences move it by about 1e-5 relative; 1e-3 is far below the fixtures' > 1% threshold margins.
constexpr double kDecisionTolerance = 1e-3;
// TaylorSeer keeps its factors in bf16 by default: a factor that lies within the two runs' 1e-6-level
// attention differences of a bf16 rounding tie rounds the other way, one bf16 step (2^-8 of its magnitude,
// ~4e-3 on these O(1) attention outputs), which the later layers and steps shrink. Measured at most 1.5e-4
// on the latents; 1e-3. With f32 factors (and for the other caches) the 1e-4 above holds.
constexpr double kBf16FactorsTolerance = 1e-3;

const CacheFixture& flux() {
  static const CacheFixture f("cache_flux_tiny");
  return f;
}
const CacheFixture& wan() {
  static const CacheFixture f("cache_wan_tiny");
  return f;
}

// The case's run on one rank: diffusers' pattern and latents, and its decision values.
void expect_case_matches_diffusers(const CacheFixture& f, const std::string& name) {
  SCOPED_TRACE(f.name + " " + name);
  const nn::StepCacheConfig config = f.config(name);
  const Result got = f.run(f.request(config));
  ASSERT_EQ(got.cache_reports.size(), 1u);
  const nn::StepCacheReport& report = got.cache_reports[0];
  const nlohmann::json& expected = f.patterns.at(name);
  EXPECT_EQ(compact_pattern(report), expected.at("compact").get<std::string>());
  const bool bf16_factors = config.kind == nn::StepCacheConfig::Kind::taylor_seer && !config.f32_factors;
  EXPECT_LT(max_abs_diff(in_fixture_layout(got.latents, f.expected.at(name)), f.expected.at(name)),
            bf16_factors ? kBf16FactorsTolerance : kLatentsTolerance);
  if (f.cases.at(name).at("type") == "TaylorSeerCacheConfig") {
    // No test to log: which hooked attentions ran in each call (the rest were predicted).
    const nlohmann::json& calls = expected.at("per_call");
    const int attentions = int(expected.at("attn_names").size());
    ASSERT_EQ(report.decisions.size(), calls.size());
    for (size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(report.decisions[i].modules_computed, calls[i].at("n_attn_run").get<int>()) << "call " << i;
      EXPECT_EQ(report.decisions[i].modules_predicted, attentions - calls[i].at("n_attn_run").get<int>())
          << "call " << i;
    }
    return;
  }
  const nlohmann::json& decisions = expected.at("decisions");
  ASSERT_EQ(report.decisions.size(), decisions.size());
  for (size_t i = 0; i < decisions.size(); ++i) {
    const nlohmann::json& d = decisions[i];
    const double value = report.decisions[i].value;
    const char* key = d.contains("fbc_rel_l1") ? "fbc_rel_l1" : "accumulated_err";
    if (d.at(key).is_null()) {
      EXPECT_TRUE(std::isnan(value)) << "call " << i << ": nothing to compare with yet, got " << value;
      continue;
    }
    const double want = d.at(key).get<double>();
    EXPECT_NEAR(value, want, kDecisionTolerance * std::max(std::fabs(want), 1e-3)) << "call " << i;
  }
  EXPECT_EQ(got.cache_computed, report.computed());
  EXPECT_EQ(got.cache_skipped, report.skipped());
}

TEST(StepCacheFixtures, FluxFirstBlockCacheIsDiffusers) {
  for (const char* name : {"fbc_T1.0", "fbc_T1.1"}) expect_case_matches_diffusers(flux(), name);
}

TEST(StepCacheFixtures, WanFirstBlockCacheKeepsEachGuidancePassApartAsDiffusers) {
  for (const char* name : {"fbc_T0.5", "fbc_T0.7"}) expect_case_matches_diffusers(wan(), name);
}

TEST(StepCacheFixtures, FluxMagCacheIsDiffusers) {
  for (const char* name : {"magcache_calibrated_T0.06", "magcache_calibrated_T0.5", "magcache_FLUX_MAG_RATIOS_T0.06",
                           "magcache_FLUX_MAG_RATIOS_T0.5"})
    expect_case_matches_diffusers(flux(), name);
}

TEST(StepCacheFixtures, WanMagCacheIsDiffusers) {
  for (const char* name : {"magcache_calibrated_T0.06", "magcache_calibrated_T0.1"})
    expect_case_matches_diffusers(wan(), name);
}

// TaylorSeer's defaults (interval 5 after 3 computed calls, first order, bf16 factors), interval 2, and
// second order with f32 factors: diffusers' predicted calls and latents.
TEST(StepCacheFixtures, FluxTaylorSeerIsDiffusers) {
  for (const char* name : {"taylorseer_default", "taylorseer_interval2_before2", "taylorseer_interval2_before2_order2_fp32"})
    expect_case_matches_diffusers(flux(), name);
}

// Wan's attentions are blocks.N.attn1 and attn2: given as patterns (the fixture's case) or left to the
// family, whose defaults they are, TaylorSeer keeps each guidance pass apart as diffusers. diffusers'
// own defaults match none of Wan's modules (its run changed nothing); cpdit refuses them, naming them.
TEST(StepCacheFixtures, WanTaylorSeerOnItsAttentionsIsDiffusers) {
  const CacheFixture& f = wan();
  expect_case_matches_diffusers(f, "taylorseer_interval2_before2_wan_attn_patterns");
  nn::StepCacheConfig family_default = f.config("taylorseer_interval2_before2_wan_attn_patterns");
  family_default.modules.clear();
  const Result got = f.run(f.request(family_default));
  const std::string want = "taylorseer_interval2_before2_wan_attn_patterns";
  EXPECT_EQ(compact_pattern(got.cache_reports.at(0)), f.patterns.at(want).at("compact").get<std::string>());
  EXPECT_LT(max_abs_diff(in_fixture_layout(got.latents, f.expected.at(want)), f.expected.at(want)), kBf16FactorsTolerance);
  EXPECT_EQ(f.patterns.at("taylorseer_default").at("compact").get<std::string>(), "FFFFFFFFFFFF");
  try {
    f.run(f.request(f.config("taylorseer_default")));
    ADD_FAILURE() << "diffusers' default patterns, which match no Wan module, were taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TaylorSeer: no module of WanTransformer3DModel matches ^blocks.*attn"),
              std::string::npos)
        << e.what();
  }
}

// Without ratios, FLUX.1 takes diffusers' FLUX_MAG_RATIOS (the fixture passed them explicitly).
TEST(StepCacheFixtures, FluxMagCacheDefaultsToDiffusersFluxRatios) {
  const CacheFixture& f = flux();
  for (const char* name : {"magcache_FLUX_MAG_RATIOS_T0.06", "magcache_FLUX_MAG_RATIOS_T0.5"}) {
    nn::StepCacheConfig config = f.config(name);
    ASSERT_EQ(config.mag_ratios, f.run_log.at("FLUX_MAG_RATIOS").get<std::vector<float>>()) << name;
    config.mag_ratios.clear();
    const Result got = f.run(f.request(config));
    EXPECT_EQ(compact_pattern(got.cache_reports.at(0)), f.patterns.at(name).at("compact").get<std::string>()) << name;
    EXPECT_LT(max_abs_diff(in_fixture_layout(got.latents, f.expected.at(name)), f.expected.at(name)), kLatentsTolerance) << name;
  }
}

// Calibration skips nothing (the latents are the uncached run's) and reports, per guidance pass, the
// ratios diffusers printed.
void expect_calibration_is_diffusers(const CacheFixture& f) {
  SCOPED_TRACE(f.name);
  const Result got = f.run(f.request(f.config("magcache_calibrate")));
  const nn::StepCacheReport& report = got.cache_reports.at(0);
  EXPECT_EQ(report.skipped(), 0);
  EXPECT_LT(max_abs_diff(in_fixture_layout(got.latents, f.expected.at("no_cache")), f.expected.at("no_cache")), kLatentsTolerance);
  const nlohmann::json& printed = f.run_log.at("mag_calibrated_ratios");
  // Flux prints one list (one cache context), Wan one per pass.
  const nlohmann::json lists = printed.at(0).is_array() ? printed : nlohmann::json::array({printed});
  ASSERT_EQ(report.calibrated_ratios.size(), lists.size());
  for (size_t branch = 0; branch < lists.size(); ++branch) {
    const auto want = lists[branch].get<std::vector<double>>();
    ASSERT_EQ(report.calibrated_ratios[branch].size(), want.size()) << "pass " << branch;
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(report.calibrated_ratios[branch][i], want[i], kDecisionTolerance * want[i])
          << "pass " << branch << " step " << i;
  }
}

TEST(StepCacheFixtures, MagCacheCalibrationReportsDiffusersRatios) {
  expect_calibration_is_diffusers(flux());
  expect_calibration_is_diffusers(wan());
}

// No cache: every call computed, the uncached latents (the fixture's no_cache), no report.
TEST(StepCacheFixtures, NoCacheRunsEveryBlock) {
  for (const CacheFixture* f : {&flux(), &wan()}) {
    const Result got = f->run(f->request({}));
    EXPECT_TRUE(got.cache_reports.empty()) << f->name;
    EXPECT_LT(max_abs_diff(in_fixture_layout(got.latents, f->expected.at("no_cache")), f->expected.at("no_cache")), kLatentsTolerance) << f->name;
  }
}

}  // namespace
}  // namespace cpdit::pipeline
