// The Qwen-Image plan under every (ring, Ulysses) mix and both ring rotations equals the
// single-rank model: the fixture, a padded text mask with token counts no degree divides, and two
// image segments (as Qwen-Image-Edit concatenates the condition image).
#include "models/qwenimage_fixture.hpp"
#include "support/plan_parity.hpp"

#include <cpdit/pipeline/presets.hpp>

namespace cpdit::models::qwenimage {
namespace {

using cpdit::testing::MeshDegrees;
using testing::fixture_checkpoint;
using testing::random_inputs;

// Ulysses 3 is left out: the fixture has 2 heads, and a Ulysses degree above the head count is
// refused (a rank would hold only padding).
void expect_every_mix_matches(const nn::TensorMap& inputs, const std::string& what,
                              const QwenImageCheckpoint& ck = fixture_checkpoint(),
                              const std::vector<MeshDegrees>& degrees = {{2, 1}, {1, 2}, {2, 2}, {3, 1}}) {
  cpdit::testing::expect_plan_parity([&] { return load_qwenimage(ck); }, inputs, what, degrees,
                                     {parallel::RotateMethod::p2p, parallel::RotateMethod::allgather},
                                     testing::relative_error, testing::kRelativeTolerance);
}

// zero_cond_t: modulate_index is made whole by the model and split by every block as the plan declares,
// so each rank's image tokens pick their own modulation half.
TEST(QwenImageParallel, ZeroCondTModulateIndexFollowsItsTokens) {
  expect_every_mix_matches(testing::fixture_inputs(testing::kZeroCondT), "zero_cond_t",
                           testing::fixture_checkpoint(testing::kZeroCondT));
}

TEST(QwenImageParallel, FixtureInputs) { expect_every_mix_matches(testing::fixture_inputs(), "fixture"); }

TEST(QwenImageParallel, PaddedTextAndUnevenTokens) {
  // 5 x 7 = 35 image and 11 text tokens (3 padded): uneven shards for 2 and 3 ranks.
  expect_every_mix_matches(random_inputs(fixture_checkpoint().config, {{1, 5, 7}}, 11, 3, 7), "padded text");
}

TEST(QwenImageParallel, TwoImageSegments) {
  // The image and a condition image of another size, 4 x 6 + 3 x 5 = 39 tokens, 8 text (2 padded).
  expect_every_mix_matches(random_inputs(fixture_checkpoint().config, {{1, 4, 6}, {1, 3, 5}}, 8, 2, 11),
                           "two segments");
}

}  // namespace
}  // namespace cpdit::models::qwenimage

namespace cpdit::models::qwenimage {
namespace {

// Ulysses 3 needs at least 3 heads: the fixture's widths with 4 heads of 16, seeded random weights.
TEST(QwenImageParallel, UlyssesThreeOnFourHeads) {
  QwenImageCheckpoint ck;
  ck.config = fixture_checkpoint().config;
  ck.config.num_attention_heads = 4;
  QwenImageTransformer2DModel shape(ck.config);
  ck.state = pipeline::random_state_dict(shape, 3);
  expect_every_mix_matches(random_inputs(ck.config, {{1, 5, 7}}, 11, 3, 13), "4 heads, padded text", ck,
                           {{1, 3}, {3, 1}, {2, 2}});
}

}  // namespace
}  // namespace cpdit::models::qwenimage
