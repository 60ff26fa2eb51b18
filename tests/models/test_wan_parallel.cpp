// The Wan plan under every (ring, Ulysses) mix equals the single-rank model: token counts that split
// evenly and that do not, and per-token timesteps (split with the tokens at the model input).
#include "models/wan_fixture.hpp"

#include <cpdit/comm/local.hpp>

#include <gtest/gtest.h>

#include <mutex>

namespace cpdit::models::wan {
namespace {

using testing::fixture_checkpoint;
using testing::fixture_inputs;
using testing::random_inputs;

struct Degrees {
  int ring, ulysses;
};
const Degrees kDegrees[] = {{2, 1}, {1, 2}, {2, 2}, {3, 1}, {4, 1}};

constexpr double kTolerance = 1e-5;

// max |sample - want| on every rank (each holds the whole sample after proj_out's gather). Only
// numbers leave the rank threads: tensors stay charged to the rank that allocated them.
std::vector<double> parallel_errors(const WanCheckpoint& ck, const nn::TensorMap& inputs, const Tensor& want,
                                    Degrees d) {
  std::vector<double> errors(size_t(d.ring * d.ulysses), -1.0);
  std::mutex mutex;
  comm::LocalOptions one_thread_each;
  one_thread_each.threads_per_rank = 1;
  comm::run_local(d.ring * d.ulysses, [&](comm::Communicator& comm) {
    auto model = load_wan(ck);  // weights shared with ck.state
    model->enable_parallelism(std::shared_ptr<comm::Communicator>(&comm, [](comm::Communicator*) {}),
                              parallel::ContextParallelConfig{d.ring, d.ulysses});
    Tensor sample = model->forward(inputs).at("sample");
    const double error = sample.shape() == want.shape() ? max_abs_diff(sample, want) : 1e30;
    std::lock_guard lock(mutex);
    errors[size_t(comm.rank())] = error;
  }, one_thread_each);
  return errors;
}

void expect_every_mix_matches(const nn::TensorMap& inputs, const std::string& what) {
  const WanCheckpoint ck = fixture_checkpoint();
  const Tensor want = load_wan(ck)->forward(inputs).at("sample");
  for (Degrees d : kDegrees)
    for (double error : parallel_errors(ck, inputs, want, d))
      EXPECT_LT(error, kTolerance) << what << ", ring " << d.ring << " x ulysses " << d.ulysses;
}

TEST(WanParallel, FixtureInputs128Tokens) { expect_every_mix_matches(fixture_inputs(), "2 x 8 x 8 tokens"); }

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
