// Our SkyReels-V2 plan under every (ring, Ulysses) mix and both ring rotations equals the single-rank
// model: per-frame timesteps (expanded per token, then split with the tokens), block-causal
// attention (a rule on global positions, evaluated per KV chunk, tokens split zigzag), and a batch
// of 2 with fps.
#include "models/skyreels_v2_fixture.hpp"
#include "support/plan_parity.hpp"

#include <gtest/gtest.h>

namespace cpdit::models::skyreels_v2 {
namespace {

using testing::random_inputs;

// The fixture's weights read as 4 heads of 6 instead of 2 of 12 (the same tensors: the q/k norm spans
// every head), so that Ulysses degree 3 has a head for each rank.
SkyReelsV2Checkpoint fixture_checkpoint() {
  SkyReelsV2Checkpoint ck = testing::fixture_checkpoint();
  ck.config.num_attention_heads = 4;
  ck.config.attention_head_dim = 6;
  return ck;
}

// The same sums split over chunks and merged by LSE: rounding of f32 outputs of magnitude ~1-5, far
// below the 1e-4 relative a wrong split or mask moves them by.
constexpr double kTolerance = 1e-5;

void expect_every_mix_matches(const SkyReelsV2Checkpoint& ck, const nn::TensorMap& inputs, const std::string& what) {
  cpdit::testing::expect_plan_parity([&] { return load_skyreels_v2(ck); },  // weights shared with ck.state
                                     inputs, what, {{2, 1}, {1, 2}, {2, 2}, {3, 1}, {1, 3}},
                                     {parallel::RotateMethod::p2p, parallel::RotateMethod::allgather},
                                     [](const Tensor& got, const Tensor& want) { return max_abs_diff(got, want); },
                                     kTolerance);
}

TEST(SkyReelsV2Parallel, PerFrameTimesteps) {
  // 3 frames of 5 x 7 patches = 105 tokens: uneven shards for 2 ranks, frames cut across ranks.
  expect_every_mix_matches(fixture_checkpoint(), random_inputs(1, 3, 10, 14, 1), "per-frame timesteps");
}

TEST(SkyReelsV2Parallel, BlockCausalFrames) {
  // Blocks of 2 frames of 4 x 5 patches: 4 frames = 80 tokens, block boundaries inside rank shards.
  const SkyReelsV2Checkpoint ck = testing::with_frames_per_block(fixture_checkpoint(), 2);
  // Causal frame blocks are split zigzag (an early and a late range per ring rank), so this checks
  // that layout; blocks of one frame (no mask) stay contiguous.
  ASSERT_EQ(load_skyreels_v2(ck)->token_layout(), parallel::TokenLayout::zigzag);
  ASSERT_EQ(load_skyreels_v2(fixture_checkpoint())->token_layout(), parallel::TokenLayout::contiguous);
  expect_every_mix_matches(ck, random_inputs(1, 4, 8, 10, 2), "block-causal");
}

TEST(SkyReelsV2Parallel, BatchOfTwoWithFps) {
  // 2 blocks of 2 frames of 4 x 3 patches: 48 tokens per item.
  nn::TensorMap inputs = random_inputs(2, 4, 8, 6, 3);
  inputs["fps"] = Tensor::from_vector({0, 1}, {2}).to(DType::i64);
  expect_every_mix_matches(testing::with_fps(testing::with_frames_per_block(fixture_checkpoint(), 2)), inputs,
                           "batch 2 + fps, block-causal");
}

}  // namespace
}  // namespace cpdit::models::skyreels_v2
