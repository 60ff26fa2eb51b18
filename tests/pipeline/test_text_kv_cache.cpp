// The text-KV cache (nn/text_kv_cache.hpp) on the pipelines whose cross-attention attends to tokens that
// do not change between steps: Wan (with CFG, and on ring 2 and Ulysses 2), SkyReels-V2 and LTX-Video
// (with its text masks). A run with it is bitwise the run without it, and it projects once per
// cross-attention and pass, however many steps; FLUX.1's joint attention never reaches it.
#include "pipeline/cache_case.hpp"

#include <gtest/gtest.h>

#include <cstring>

namespace cpdit::pipeline {
namespace {

using cpdit::testing::fixture_dir;

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.raw(), y.raw(), x.nbytes()) == 0;
}

struct Case {
  std::string fixture;
  Request request;
};

Case fixture_case(const std::string& fixture) { return {fixture, testing::pipeline_case_call(fixture)}; }

// The case with and without the cache on `ring` x `ulysses` ranks: bitwise the same latents, and with it
// every cross-attention projection after each pass's first call reused.
void expect_exact_and_reused(const Case& c, int ring = 1, int ulysses = 1) {
  SCOPED_TRACE(c.fixture + " on ring " + std::to_string(ring) + " x Ulysses " + std::to_string(ulysses));
  const Pipeline pipe = Pipeline::open({.model = fixture_dir(c.fixture) + "/pipeline"}, LoadPolicy::resident);
  Request r = c.request;
  r.parallel.ranks = ring * ulysses;
  r.parallel.ring = ring;
  r.parallel.ulysses = ulysses;
  StageLog log;
  r.text_kv_cache = false;
  const Result without = pipe.run(r, log);
  EXPECT_EQ(without.text_kv_reused + without.text_kv_projected, 0);
  r.text_kv_cache = true;
  const Result with = pipe.run(r, log);
  EXPECT_TRUE(bitwise_equal(with.latents, without.latents)) << max_abs_diff(with.latents, without.latents);
  ASSERT_GT(with.text_kv_projected, 0);
  EXPECT_GT(with.text_kv_reused, 0);
  // Each cross-attention projects once per pass (and per source: text, image tokens), on its first call:
  // a longer run projects no more.
  r.steps += 1;
  const Result longer = pipe.run(r, log);
  EXPECT_EQ(longer.text_kv_projected, with.text_kv_projected);
  EXPECT_GT(longer.text_kv_reused, with.text_kv_reused);
}

TEST(TextKvCache, WanWithGuidanceIsBitwiseTheUncachedRunOnEverySplit) {
  const Case wan = fixture_case("wan_pipeline_tiny");
  expect_exact_and_reused(wan);
  expect_exact_and_reused(wan, 2, 1);
  expect_exact_and_reused(wan, 1, 2);
}

TEST(TextKvCache, SkyReelsAndLtxAreBitwiseTheUncachedRun) {
  expect_exact_and_reused(fixture_case("skyreels_df_tiny"));
  expect_exact_and_reused(fixture_case("ltx_pipeline_tiny"));
}

// FLUX.1 modulates its text in every block: its joint attention projects it afresh, uncached.
TEST(TextKvCache, FluxNeverReachesIt) {
  const testing::CacheFixture f("cache_flux_tiny");
  const Result got = f.run(f.request({}));
  EXPECT_EQ(got.text_kv_reused + got.text_kv_projected, 0);
}

}  // namespace
}  // namespace cpdit::pipeline
