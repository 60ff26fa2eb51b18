// The Wan plan under every (ring, Ulysses) mix equals the single-rank model: token counts that split
// evenly and that do not, and per-token timesteps (split with the tokens at the model input); on the
// fixture's inputs every mix also equals diffusers' sample.
#include "models/wan_fixture.hpp"
#include "support/plan_parity.hpp"

namespace cpdit::models::wan {
namespace {

using testing::fixture_checkpoint;
using testing::fixture_dir;
using testing::fixture_inputs;
using testing::random_inputs;

constexpr double kTolerance = 1e-5;
// Against diffusers: test_wan.cpp's one-rank tolerance (PyTorch's and our f32 sums differ in order).
constexpr double kFixtureTolerance = 1e-4;

const std::vector<cpdit::testing::MeshDegrees> kMeshes{{2, 1}, {1, 2}, {2, 2}, {3, 1}, {4, 1}};

double max_diff(const Tensor& got, const Tensor& want) { return max_abs_diff(got, want); }

void expect_every_mix_matches(const nn::TensorMap& inputs, const std::string& what) {
  const WanCheckpoint ck = fixture_checkpoint();
  cpdit::testing::expect_plan_parity([&] { return load_wan(ck); }, inputs, what, kMeshes,
                                     {parallel::RotateMethod::p2p}, max_diff, kTolerance);
}

TEST(WanParallel, FixtureInputs128Tokens) {
  expect_every_mix_matches(fixture_inputs(), "2 x 8 x 8 tokens");
  const WanCheckpoint ck = fixture_checkpoint();
  const Tensor diffusers = io::load_safetensors(fixture_dir() + "/expected.safetensors").at("sample");
  cpdit::testing::expect_meshes_match([&] { return load_wan(ck); }, fixture_inputs(), diffusers,
                                      "2 x 8 x 8 tokens against diffusers", kMeshes, {parallel::RotateMethod::p2p},
                                      max_diff, kFixtureTolerance);
}

TEST(WanParallel, TokensThatDivideEveryDegree) {
  // 3 latent frames of 6 x 10 patches = 180 tokens.
  expect_every_mix_matches(random_inputs(fixture_checkpoint().config, 3, 12, 20, false, 1), "3 x 6 x 10 tokens");
}

TEST(WanParallel, TokensThatDivideNoDegree) {
  // 1 x 5 x 7 = 35 tokens: uneven shards for 2, 3 and 4 ranks.
  expect_every_mix_matches(random_inputs(fixture_checkpoint().config, 1, 10, 14, false, 2), "1 x 5 x 7 tokens");
}

TEST(WanParallel, PerTokenTimestepsAreSplitWithTheTokens) {
  // 3 x 5 x 7 = 105 tokens, each with its own timestep (B, S).
  expect_every_mix_matches(random_inputs(fixture_checkpoint().config, 3, 10, 14, true, 3), "per-token timestep");
}

}  // namespace
}  // namespace cpdit::models::wan
