// The Qwen-Image plan under every (ring, Ulysses) mix and both ring rotations equals the
// single-rank model: the fixture, a padded text mask with token counts no degree divides, and two
// image segments (as Qwen-Image-Edit concatenates the condition image).
#include "models/qwenimage_fixture.hpp"

#include <cpdit/comm/local.hpp>
#include <cpdit/pipeline/presets.hpp>

#include <gtest/gtest.h>

#include <mutex>

namespace cpdit::models::qwenimage {
namespace {

using testing::fixture_checkpoint;
using testing::kRelativeTolerance;
using testing::random_inputs;
using testing::relative_error;

struct Degrees {
  int ring, ulysses;
};
// Ulysses 3 is left out: the fixture has 2 heads, and a Ulysses degree above the head count is
// refused (a rank would hold only padding).
const Degrees kDegrees[] = {{2, 1}, {1, 2}, {2, 2}, {3, 1}};

// relative |sample - want| on every rank (each holds the whole sample after proj_out's gather).
std::vector<double> parallel_errors(const QwenImageCheckpoint& ck, const nn::TensorMap& inputs, const Tensor& want,
                                    Degrees d, parallel::RotateMethod rotation) {
  std::vector<double> errors(size_t(d.ring * d.ulysses), -1.0);
  std::mutex mutex;
  comm::LocalOptions one_thread_each;
  one_thread_each.threads_per_rank = 1;
  comm::run_local(d.ring * d.ulysses, [&](comm::Communicator& comm) {
    auto model = load_qwenimage(ck);  // weights shared with ck.state
    parallel::ContextParallelConfig config{d.ring, d.ulysses};
    config.rotate_method = rotation;
    model->enable_parallelism(std::shared_ptr<comm::Communicator>(&comm, [](comm::Communicator*) {}), config);
    Tensor sample = model->forward(inputs).at("sample");
    const double error = sample.shape() == want.shape() ? relative_error(sample, want) : 1e30;
    std::lock_guard lock(mutex);
    errors[size_t(comm.rank())] = error;
  }, one_thread_each);
  return errors;
}

void expect_every_mix_matches(const nn::TensorMap& inputs, const std::string& what,
                              const QwenImageCheckpoint& ck = fixture_checkpoint(),
                              const std::vector<Degrees>& degrees = {std::begin(kDegrees), std::end(kDegrees)}) {
  const Tensor want = load_qwenimage(ck)->forward(inputs).at("sample");
  for (auto rotation : {parallel::RotateMethod::p2p, parallel::RotateMethod::allgather})
    for (Degrees d : degrees)
      for (double error : parallel_errors(ck, inputs, want, d, rotation))
        EXPECT_LT(error, kRelativeTolerance) << what << ", ring " << d.ring << " x ulysses " << d.ulysses
                                             << (rotation == parallel::RotateMethod::p2p ? ", p2p" : ", allgather");
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
