// Parallel decode (the plan splits rows over the ranks; halo exchange, summed GroupNorm statistics,
// ring attention in the mid block) equals the one-rank decode, for row counts that no
// rank count divides.
#include "models/vae_fixture.hpp"
#include "support/random_normal.hpp"

#include <cpdit/comm/local.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/models/vae/autoencoder_kl.hpp>
#include <cpdit/models/vae/autoencoder_kl_ltx.hpp>
#include <cpdit/models/vae/autoencoder_kl_wan.hpp>

#include <gtest/gtest.h>

#include <mutex>

namespace cpdit::models::vae {
namespace {

using testing::fixture_config;
using testing::fixture_weights;
using testing::relative_to_range;
using cpdit::testing::random_normal;

// Each output pixel is computed from the same numbers in the same order on P ranks as on one,
// except the GroupNorm sums (another order, in double) and the attention softmax (merged across
// ring chunks by LSE): both move the output by float32 rounding, far below this.
constexpr double kTolerance = 1e-5;

// The error of every rank's gathered decode against `want` (only numbers leave the rank threads).
struct Degrees {
  int ring, ulysses;
};
// The mid-block attention has one head, so the ranks form a ring (Ulysses is refused at setup).
const Degrees kDegrees[] = {{2, 1}, {3, 1}, {4, 1}};

// `inputs` as the model's forward takes them: `latents` [, `timestep`].
template <class Load>
std::vector<double> parallel_errors(Degrees d, const Load& load, const nn::TensorMap& inputs, const Tensor& want) {
  const int ranks = d.ring * d.ulysses;
  std::vector<double> errors(size_t(ranks), -1.0);
  std::mutex mutex;
  comm::LocalOptions one_thread_each;
  one_thread_each.threads_per_rank = 1;
  comm::run_local(ranks, [&](comm::Communicator& comm) {
    auto vae = load();
    vae->enable_parallelism(std::shared_ptr<comm::Communicator>(&comm, [](comm::Communicator*) {}),
                            parallel::ContextParallelConfig{d.ring, d.ulysses});
    const Tensor sample = vae->forward(inputs).at("sample");
    const double error = relative_to_range(sample, want);
    std::lock_guard lock(mutex);
    errors[size_t(comm.rank())] = error;
  }, one_thread_each);
  return errors;
}

TEST(VaeParallel, AutoencoderKLRowsThatNoRankCountDivides) {
  auto load = [] { return load_autoencoder_kl(fixture_weights("vae_kl_tiny"), fixture_config("vae_kl_tiny")); };
  const Tensor latents = random_normal({1, 4, 7, 5}, 1);  // 7 latent rows -> 14 image rows
  const Tensor want = load()->decode(latents);
  for (Degrees d : kDegrees)
    for (double error : parallel_errors(d, load, {{"latents", latents}}, want))
      EXPECT_LE(error, kTolerance) << "ring " << d.ring << " x ulysses " << d.ulysses;
}

TEST(VaeParallel, AutoencoderKLWanRowsThatNoRankCountDivides) {
  auto load = [] { return load_autoencoder_kl_wan(fixture_weights("vae_wan_tiny"), fixture_config("vae_wan_tiny")); };
  const Tensor latents = random_normal({1, 4, 3, 7, 4}, 2);  // 3 latent frames -> 9 video frames
  const Tensor want = load()->decode(latents);
  for (Degrees d : kDegrees)
    for (double error : parallel_errors(d, load, {{"latents", latents}}, want))
      EXPECT_LE(error, kTolerance) << "ring " << d.ring << " x ulysses " << d.ulysses;
}

// The frame split: each rank decodes its latent frames whole, the causal time convolutions take the
// frames before from the rank before. 5 latent frames over 2 and 3 ranks (3+2, 2+2+1: rank 2 holds
// one frame, fewer than a time halo, and rank 0's first frame is the one the upsamplers pass
// through), and 4 over 4 (rank 0 holds only the first frame, so its upsamplers' time streams are
// empty; ranks pass on halo frames they received). Two latent rows: too few for a row split over 3
// or 4 ranks, so these decodes cannot have split rows.
TEST(VaeParallel, AutoencoderKLWanFramesThatNoRankCountDivides) {
  auto load = [] {
    auto vae = load_autoencoder_kl_wan(fixture_weights("vae_wan_tiny"), fixture_config("vae_wan_tiny"));
    vae->set_video_split(VideoSplit::frames);
    return vae;
  };
  for (int64_t frames : {5, 4}) {
    const Tensor latents = random_normal({1, 4, frames, 2, 3}, 5);
    const Tensor want = load()->decode(latents);
    for (Degrees d : kDegrees) {
      if ((frames == 4) != (d.ring == 4)) continue;
      for (double error : parallel_errors(d, load, {{"latents", latents}}, want))
        EXPECT_LE(error, kTolerance) << frames << " latent frames, " << d.ring << " ranks";
    }
  }
}

TEST(VaeParallel, RefusesAFrameSplitOverMoreRanksThanLatentFrames) {
  auto load = [] {
    auto vae = load_autoencoder_kl_wan(fixture_weights("vae_wan_tiny"), fixture_config("vae_wan_tiny"));
    vae->set_video_split(VideoSplit::frames);
    return vae;
  };
  const Tensor latents = random_normal({1, 4, 2, 4, 3}, 6);
  EXPECT_THROW(parallel_errors({3, 1}, load, {{"latents", latents}}, Tensor::zeros({1, 3, 5, 32, 24})), Error);
  // The split is chosen before enable_parallelism installs its plan.
  comm::run_local(1, [&](comm::Communicator& comm) {
    auto late = load();
    late->enable_parallelism(std::shared_ptr<comm::Communicator>(&comm, [](comm::Communicator*) {}),
                             parallel::ContextParallelConfig{1, 1});
    EXPECT_THROW(late->set_video_split(VideoSplit::rows), Error);
  });
}

// Both LTX-Video layouts (replicate time padding, depth-to-space, the timestep-conditioned
// modulations; 16x in space for the conditioned one): 5 latent rows.
TEST(VaeParallel, AutoencoderKLLTXVideoRowsThatNoRankCountDivides) {
  for (const std::string fixture : {"vae_ltx_tiny/plain", "vae_ltx_tiny/timestep"}) {
    auto load = [&] { return load_autoencoder_kl_ltx(fixture_weights(fixture), fixture_config(fixture)); };
    nn::TensorMap inputs = testing::fixture_file(fixture, "inputs");
    inputs["latents"] = random_normal({1, 8, 2, 5, 3}, 4);
    const Tensor want = load()->forward(inputs).at("sample");
    for (Degrees d : kDegrees)
      for (double error : parallel_errors(d, load, inputs, want))
        EXPECT_LE(error, kTolerance) << fixture << " ring " << d.ring << " x ulysses " << d.ulysses;
  }
}

TEST(VaeParallel, RefusesFewerLatentRowsThanRanks) {
  auto load = [] { return load_autoencoder_kl(fixture_weights("vae_kl_tiny"), fixture_config("vae_kl_tiny")); };
  const Tensor latents = random_normal({1, 4, 3, 5}, 3);
  EXPECT_THROW(parallel_errors({4, 1}, load, {{"latents", latents}}, Tensor::zeros({1, 3, 6, 10})), Error);
}

}  // namespace
}  // namespace cpdit::models::vae
