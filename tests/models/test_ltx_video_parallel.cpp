// The LTX-Video plan under every (ring, Ulysses) mix and both ring rotations equals the single-rank
// model. The plan splits the text with the tokens, so cross-attention runs on a rank's share of the
// text keys, of another length than its queries, with the share of the text mask that follows them:
// the fixture, per-token timesteps with padded text and token and text counts no degree divides,
// and a batch of three with text padded in one item and absent in another.
#include "models/ltx_video_fixture.hpp"
#include "support/plan_parity.hpp"

#include <cpdit/pipeline/presets.hpp>

namespace cpdit::models::ltx_video {
namespace {

using cpdit::testing::MeshDegrees;
using testing::fixture_checkpoint;
using testing::random_inputs;

void expect_every_mix_matches(const nn::TensorMap& inputs, const std::string& what,
                              const LtxVideoCheckpoint& ck = fixture_checkpoint(),
                              const std::vector<MeshDegrees>& degrees = {{2, 1}, {1, 2}, {2, 2}, {3, 1}}) {
  cpdit::testing::expect_plan_parity([&] { return load_ltx_video(ck); }, inputs, what, degrees,
                                     {parallel::RotateMethod::p2p, parallel::RotateMethod::allgather},
                                     testing::relative_error, testing::kRelativeTolerance);
}

TEST(LtxVideoParallel, FixtureInputs) { expect_every_mix_matches(testing::fixture_inputs(), "fixture"); }

TEST(LtxVideoParallel, PerTokenTimestepsPaddedTextUnevenCounts) {
  // 1 x 5 x 7 = 35 video and 11 text tokens (4 padded): uneven shards of both for 2, 3 and 4 ranks.
  expect_every_mix_matches(random_inputs(fixture_checkpoint().config, {1, 5, 7}, 11, 4, 7), "per-token, padded");
}

TEST(LtxVideoParallel, FewerTextTokensThanRanks) {
  // 2 text tokens (1 padded): with 3 or 4 ranks some hold no text key at all.
  expect_every_mix_matches(random_inputs(fixture_checkpoint().config, {2, 3, 4}, 2, 1, 17), "two text tokens");
}

TEST(LtxVideoParallel, BatchWithPaddedAndEmptyText) {
  expect_every_mix_matches(testing::fixture_inputs("ltx_video_per_token"), "per-token fixture");
}

// Ulysses 3 needs at least 3 heads: the fixture's widths with 4 heads of 12, seeded random weights.
TEST(LtxVideoParallel, UlyssesThreeOnFourHeads) {
  LtxVideoCheckpoint ck;
  ck.config = fixture_checkpoint().config;
  ck.config.num_attention_heads = 4;
  ck.config.cross_attention_dim = ck.config.inner_dim();
  LTXVideoTransformer3DModel shape(ck.config);
  ck.state = pipeline::random_state_dict(shape, 3);
  expect_every_mix_matches(random_inputs(ck.config, {1, 5, 7}, 11, 3, 13), "4 heads, padded text", ck,
                           {{1, 3}, {3, 1}, {2, 2}});
}

}  // namespace
}  // namespace cpdit::models::ltx_video
