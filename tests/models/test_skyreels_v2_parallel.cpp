// Our SkyReels-V2 plan under every (ring, Ulysses) mix and both ring rotations equals the single-rank
// model: per-frame timesteps (expanded per token, then split with the tokens), block-causal
// attention (a rule on global positions, evaluated per KV chunk), and a batch of 2 with fps.
#include "models/skyreels_v2_fixture.hpp"

#include <cpdit/comm/local.hpp>

#include <gtest/gtest.h>

#include <mutex>

namespace cpdit::models::skyreels_v2 {
namespace {

using common::wan::WanCheckpoint;
using testing::random_inputs;

// The fixture's weights read as 4 heads of 6 instead of 2 of 12 (the same tensors: the q/k norm spans
// every head), so that Ulysses degree 3 has a head for each rank.
WanCheckpoint fixture_checkpoint() {
  WanCheckpoint ck = testing::fixture_checkpoint();
  ck.config.num_attention_heads = 4;
  ck.config.attention_head_dim = 6;
  return ck;
}

struct Degrees {
  int ring, ulysses;
};
const Degrees kDegrees[] = {{2, 1}, {1, 2}, {2, 2}, {3, 1}, {1, 3}};
const parallel::RotateMethod kRotations[] = {parallel::RotateMethod::p2p, parallel::RotateMethod::allgather};

// The same sums split over chunks and merged by LSE: rounding of f32 outputs of magnitude ~1-5, far
// below the 1e-4 relative a wrong split or mask moves them by.
constexpr double kTolerance = 1e-5;

// max |sample - want| on every rank (each holds the whole sample after proj_out's gather).
std::vector<double> parallel_errors(const WanCheckpoint& ck, const nn::TensorMap& inputs, const Tensor& want,
                                    parallel::ContextParallelConfig config) {
  const int ranks = config.group_size();
  std::vector<double> errors(size_t(ranks), -1.0);
  std::mutex mutex;
  comm::LocalOptions one_thread_each;
  one_thread_each.threads_per_rank = 1;
  comm::run_local(ranks, [&](comm::Communicator& comm) {
    auto model = load_skyreels_v2(ck);  // weights shared with ck.state
    model->enable_parallelism(std::shared_ptr<comm::Communicator>(&comm, [](comm::Communicator*) {}), config);
    Tensor sample = model->forward(inputs).at("sample");
    const double error = sample.shape() == want.shape() ? max_abs_diff(sample, want) : 1e30;
    std::lock_guard lock(mutex);
    errors[size_t(comm.rank())] = error;
  }, one_thread_each);
  return errors;
}

void expect_every_mix_matches(const WanCheckpoint& ck, const nn::TensorMap& inputs, const std::string& what) {
  const Tensor want = load_skyreels_v2(ck)->forward(inputs).at("sample");
  for (Degrees d : kDegrees)
    for (parallel::RotateMethod rotation : kRotations) {
      parallel::ContextParallelConfig config{d.ring, d.ulysses, rotation};
      for (double error : parallel_errors(ck, inputs, want, config))
        EXPECT_LT(error, kTolerance) << what << ", ring " << d.ring << " x ulysses " << d.ulysses << " "
                                     << parallel::rotate_method_name(rotation);
    }
}

TEST(SkyReelsV2Parallel, PerFrameTimesteps) {
  // 3 frames of 5 x 7 patches = 105 tokens: uneven shards for 2 ranks, frames cut across ranks.
  expect_every_mix_matches(fixture_checkpoint(), random_inputs(1, 3, 10, 14, 1), "per-frame timesteps");
}

TEST(SkyReelsV2Parallel, BlockCausalFrames) {
  // Blocks of 2 frames of 4 x 5 patches: 4 frames = 80 tokens, block boundaries inside rank shards.
  expect_every_mix_matches(testing::with_frames_per_block(fixture_checkpoint(), 2), random_inputs(1, 4, 8, 10, 2),
                           "block-causal");
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
