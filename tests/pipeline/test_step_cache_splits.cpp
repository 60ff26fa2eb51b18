// Step caches under every split: ring 2, Ulysses 2, ring 2 x Ulysses 2, ring 3 (uneven token shares on
// Wan's 8 tokens) and, for Wan's guided pipeline, CFG-parallel 2 (alone and with ring 2 inside each
// group). Every rank's decision log is the one-rank log of its guidance pass, call by call, and the ranks
// that share a pass hold bitwise the same decision values (each compares the sums reduced over its group,
// not its own tokens' quotient); the final latents are the one-rank latents. TaylorSeer predicts the same
// modules on the same calls. Among the cases, thresholds
// set 0.5% either side of a logged decision value: a decision that close is still every split's.
#include "pipeline/cache_case.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace cpdit::pipeline {
namespace {

using cpdit::testing::CacheFixture;

// The same skips on every split: the latents differ by the attention's summation order only, which
// moves these tiny models' latents by at most a few 1e-6 over their 6 and 8 steps.
constexpr double kSplitTolerance = 1e-5;
// TaylorSeer's bf16 factors (its default): the splits' 1e-7-level attention differences move a factor
// near a bf16 rounding tie across it, one bf16 step (2^-8 of its magnitude) in a predicted output, which
// the later layers shrink; measured at most 3.3e-4 on these latents. With f32 factors, 1e-5 holds.
constexpr double kBf16FactorsSplitTolerance = 1e-3;
// A calibration ratio is a mean of per-token quotients: its sum over tokens in another order and the
// rounding of the split attention move it by about 1e-6 relative.
constexpr double kRatioTolerance = 1e-5;

struct Split {
  const char* name;
  int ranks, ring, ulysses, cfg;
};

const std::vector<Split> kSplits{
    {"ring 2", 2, 2, 1, 1}, {"ulysses 2", 2, 1, 2, 1}, {"ring 2 x ulysses 2", 4, 2, 2, 1}, {"ring 3", 3, 3, 1, 1}};
const std::vector<Split> kCfgSplits{{"cfg 2", 2, 1, 1, 2}, {"cfg 2 x ring 2", 4, 2, 1, 2}};

const CacheFixture& flux() {
  static const CacheFixture f("cache_flux_tiny");
  return f;
}
const CacheFixture& wan() {
  static const CacheFixture f("cache_wan_tiny");
  return f;
}

std::vector<nn::CacheDecision> of_branch(const nn::StepCacheReport& report, int branch) {
  std::vector<nn::CacheDecision> out;
  for (const nn::CacheDecision& d : report.decisions)
    if (d.branch == branch) out.push_back(d);
  return out;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// `base` with `cache` on one rank (kept in `one_rank` when given), then on each split: the checks the
// file's comment names.
void expect_every_split_decides_as_one_rank(const std::string& name, const Pipeline& pipe, Request base,
                                            const nn::StepCacheConfig& cache, const std::vector<Split>& splits,
                                            Result* one_rank = nullptr) {
  base.cache = cache;
  StageLog log;
  const Result one = pipe.run(base, log);
  if (one_rank != nullptr) *one_rank = one;
  const nn::StepCacheReport& reference = one.cache_reports.at(0);
  for (const Split& s : splits) {
    SCOPED_TRACE(name + " " + nn::step_cache_name(cache) + " on " + s.name);
    Request r = base;
    r.parallel.ranks = s.ranks;
    r.parallel.ring = s.ring;
    r.parallel.ulysses = s.ulysses;
    r.parallel.cfg = s.cfg;
    const Result got = pipe.run(r, log);
    ASSERT_EQ(got.cache_reports.size(), size_t(s.ranks));
    const bool bf16_factors = cache.kind == nn::StepCacheConfig::Kind::taylor_seer && !cache.f32_factors;
    EXPECT_LT(max_abs_diff(got.latents, one.latents), bf16_factors ? kBf16FactorsSplitTolerance : kSplitTolerance);
    EXPECT_EQ(got.cache_computed, reference.computed());
    EXPECT_EQ(got.cache_skipped, reference.skipped());
    for (int branch = 0; branch < 2; ++branch) {
      const std::vector<nn::CacheDecision> want = of_branch(reference, branch);
      const std::vector<nn::CacheDecision>* first = nullptr;  // the first rank's log of this pass
      std::vector<std::vector<nn::CacheDecision>> logs(size_t(s.ranks));
      int holders = 0;
      for (int rank = 0; rank < s.ranks; ++rank) {
        logs[size_t(rank)] = of_branch(got.cache_reports[size_t(rank)], branch);
        const std::vector<nn::CacheDecision>& log = logs[size_t(rank)];
        if (log.empty()) continue;  // CFG-parallel: the other pass's rank
        ++holders;
        ASSERT_EQ(log.size(), want.size()) << "rank " << rank << " pass " << branch;
        for (size_t i = 0; i < log.size(); ++i) {
          EXPECT_EQ(log[i].computed, want[i].computed) << "rank " << rank << " pass " << branch << " call " << i;
          EXPECT_EQ(log[i].modules_predicted, want[i].modules_predicted) << "rank " << rank << " call " << i;
          EXPECT_EQ(std::isnan(log[i].value), std::isnan(want[i].value)) << "rank " << rank << " call " << i;
          if (first != nullptr)
            EXPECT_TRUE(same_bits(log[i].value, (*first)[i].value))
                << "rank " << rank << " pass " << branch << " call " << i << ": " << log[i].value << " vs "
                << (*first)[i].value;
        }
        if (first == nullptr) first = &log;
      }
      // Every rank of the group that runs this pass took part.
      EXPECT_EQ(holders, want.empty() ? 0 : s.ranks / s.cfg) << "pass " << branch;
    }
    // Calibration's ratios are one rank's, from every rank that ran the pass.
    for (int rank = 0; rank < s.ranks; ++rank) {
      const auto& ratios = got.cache_reports[size_t(rank)].calibrated_ratios;
      for (size_t branch = 0; branch < ratios.size(); ++branch) {
        if (ratios[branch].empty()) continue;
        ASSERT_EQ(ratios[branch].size(), reference.calibrated_ratios.at(branch).size());
        for (size_t i = 0; i < ratios[branch].size(); ++i)
          EXPECT_NEAR(ratios[branch][i], reference.calibrated_ratios[branch][i],
                      kRatioTolerance * reference.calibrated_ratios[branch][i])
              << "rank " << rank << " pass " << branch << " step " << i;
      }
    }
  }
}

void expect_every_split_decides_as_one_rank(const CacheFixture& f, const nn::StepCacheConfig& cache,
                                            const std::vector<Split>& splits, Result* one_rank = nullptr) {
  expect_every_split_decides_as_one_rank(f.name, f.pipe, f.request({}), cache, splits, one_rank);
}

TEST(StepCacheSplits, FluxFirstBlockCacheDecidesAsOneRankOnEverySplit) {
  for (const char* name : {"fbc_T1.0", "fbc_T1.1"})
    expect_every_split_decides_as_one_rank(flux(), flux().config(name), kSplits);
}

TEST(StepCacheSplits, WanFirstBlockCacheDecidesAsOneRankOnEverySplitAndCfgParallel) {
  std::vector<Split> splits = kSplits;
  splits.insert(splits.end(), kCfgSplits.begin(), kCfgSplits.end());
  for (const char* name : {"fbc_T0.5", "fbc_T0.7"})
    expect_every_split_decides_as_one_rank(wan(), wan().config(name), splits);
}

// MagCache's decisions read no tensor, but a skip applies the residual to the head block's input as the
// ranks hold it (Wan's plan splits it at blocks.0, which a skip never calls).
TEST(StepCacheSplits, MagCacheSkipsAndCalibratesAsOneRankOnEverySplit) {
  for (const char* name : {"magcache_FLUX_MAG_RATIOS_T0.5", "magcache_calibrate"})
    expect_every_split_decides_as_one_rank(flux(), flux().config(name), kSplits);
  std::vector<Split> splits = kSplits;
  splits.insert(splits.end(), kCfgSplits.begin(), kCfgSplits.end());
  for (const char* name : {"magcache_calibrated_T0.1", "magcache_calibrate"})
    expect_every_split_decides_as_one_rank(wan(), wan().config(name), splits);
}

// TaylorSeer's schedule counts calls, and each rank predicts its own tokens' attention outputs: with
// f32 factors as close to one rank as the other caches, with bf16 factors within a bf16 step.
TEST(StepCacheSplits, TaylorSeerPredictsAsOneRankOnEverySplit) {
  for (const char* name : {"taylorseer_default", "taylorseer_interval2_before2_order2_fp32"})
    expect_every_split_decides_as_one_rank(flux(), flux().config(name), kSplits);
  std::vector<Split> splits = kSplits;
  splits.insert(splits.end(), kCfgSplits.begin(), kCfgSplits.end());
  nn::StepCacheConfig attentions = wan().config("taylorseer_interval2_before2_wan_attn_patterns");
  expect_every_split_decides_as_one_rank(wan(), attentions, splits);
  attentions.f32_factors = true;
  expect_every_split_decides_as_one_rank(wan(), attentions, splits);
}

// The first compared call of the conditional pass (call 1: only the always-computed call 0 comes
// before it, so its value does not depend on the threshold), with the threshold 0.5% above its value
// (a skip) and 0.5% below (a compute): within 1% of the threshold, every split still decides as one rank.
void expect_near_threshold_decisions_agree(const CacheFixture& f, const std::string& name,
                                           const std::vector<Split>& splits) {
  nn::StepCacheConfig config = f.config(name);
  const Result logged = f.run(f.request(config));
  const std::vector<nn::CacheDecision> calls = of_branch(logged.cache_reports.at(0), 0);
  ASSERT_GE(calls.size(), 2u);
  const double value = calls[1].value;
  ASSERT_FALSE(std::isnan(value));
  for (double factor : {1.005, 0.995}) {
    config.threshold = value * factor;
    Result one;
    expect_every_split_decides_as_one_rank(f, config, splits, &one);
    ASSERT_FALSE(one.cache_reports.empty());
    const nn::CacheDecision near = of_branch(one.cache_reports.at(0), 0).at(1);
    EXPECT_LT(std::fabs(near.value - config.threshold), 0.01 * config.threshold) << factor;
    EXPECT_EQ(near.computed, factor < 1) << factor;
  }
}

TEST(StepCacheSplits, DecisionsWithin1PercentOfTheThresholdAreOneRanksOnEverySplit) {
  expect_near_threshold_decisions_agree(flux(), "fbc_T1.0", kSplits);
  std::vector<Split> splits = kSplits;
  splits.insert(splits.end(), kCfgSplits.begin(), kCfgSplits.end());
  expect_near_threshold_decisions_agree(wan(), "fbc_T0.5", splits);
}

// Qwen-Image (true CFG, its two streams) and LTX-Video (one stream, text masks) run their blocks through
// the same loop: FirstBlockCache with a threshold 0.5% above the first compared value (so that call
// skips), and TaylorSeer on the family's attention patterns (f32 factors, so that 1e-5 holds), take the
// one-rank decisions on every split;
// a threshold of 0 skips nothing and leaves the uncached latents bitwise.
void expect_family_caches_decide_as_one_rank(const std::string& fixture) {
  SCOPED_TRACE(fixture);
  const Pipeline pipe = Pipeline::open({.model = testing::fixture_dir(fixture) + "/pipeline"}, LoadPolicy::resident);
  const Request base = testing::pipeline_case_call(fixture);
  StageLog log;
  const Result uncached = pipe.run(base, log);
  Request r = base;
  r.cache = nn::parse_step_cache("fbcache:0");
  const Result zero = pipe.run(r, log);
  EXPECT_EQ(zero.cache_skipped, 0);
  EXPECT_EQ(max_abs_diff(zero.latents, uncached.latents), 0.0);
  const std::vector<nn::CacheDecision> calls = of_branch(zero.cache_reports.at(0), 0);
  ASSERT_GE(calls.size(), 2u);
  ASSERT_FALSE(std::isnan(calls[1].value));
  nn::StepCacheConfig fbc = r.cache;
  fbc.threshold = calls[1].value * 1.005;
  Result one;
  expect_every_split_decides_as_one_rank(fixture, pipe, base, fbc, kSplits, &one);
  EXPECT_GT(one.cache_skipped, 0);
  expect_every_split_decides_as_one_rank(fixture, pipe, base, nn::parse_step_cache("taylorseer:interval=2,before=1,factors=f32"),
                                         kSplits, &one);
  EXPECT_GT(one.cache_modules_predicted, 0);
}

TEST(StepCacheSplits, QwenImageAndLtxVideoCachesDecideAsOneRankOnEverySplit) {
  expect_family_caches_decide_as_one_rank("qwenimage_pipeline_tiny");
  expect_family_caches_decide_as_one_rank("ltx_pipeline_tiny");
}

}  // namespace
}  // namespace cpdit::pipeline
