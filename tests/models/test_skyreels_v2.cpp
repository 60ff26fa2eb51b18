// SkyReelsV2Transformer3DModel against diffusers' own numbers (tests/data/fixtures/skyreels_v2_tiny),
// the fps embedding for a batch of 2 (where diffusers 0.42.1 fails) and block-causal attention.
#include "support/relative_error.hpp"
#include "models/skyreels_v2_fixture.hpp"

#include <cpdit/core/error.hpp>

#include <gtest/gtest.h>

namespace cpdit::models::skyreels_v2 {
namespace {

using testing::fixture_checkpoint;
using testing::fixture_dir;
using testing::fixture_inputs;
using testing::random_inputs;
using cpdit::testing::relative_error;  // max |got - want| / max |want|

// float32 vs float64 runs of these models differ by <= 2.3e-6 on outputs of magnitude up to 4.7
// (fixtures README), i.e. about 5e-7 relative; the porting mistakes it lists move outputs by >= 1e-4
// relative. 1e-5 of the expected range sits between the two.
constexpr double kRelative = 1e-5;

TEST(SkyReelsV2, SampleAndIntermediatesMatchDiffusers) {
  auto model = load_skyreels_v2(fixture_checkpoint());
  cpdit::testing::expect_forward_matches(*model, fixture_inputs(), "sample",
                                         cpdit::testing::fixture_file(testing::kFixture, "expected").at("sample"),
                                         testing::wan_intermediates(testing::kFixture), relative_error, kRelative);
}

// Using one frame's timestep for every token moves the sample by half its range (fixtures README):
// the per-frame expansion is what the fixture checks; this pins the frame order of that expansion.
TEST(SkyReelsV2, EachFrameUsesItsOwnTimestep) {
  auto model = load_skyreels_v2(fixture_checkpoint());
  auto inputs = fixture_inputs();
  const Tensor want = model->forward(inputs).at("sample");
  inputs["timestep"] = Tensor::from_vector({310, 620, 900}, {1, 3}).to(DType::i64);
  EXPECT_GT(relative_error(model->forward(inputs).at("sample"), want), 0.1);
}

// A batch of 2 equals two batch-1 runs, with one fps for the batch and with one per item.
TEST(SkyReelsV2, FpsEmbeddingServesEveryBatchItem) {
  auto model = load_skyreels_v2(testing::with_fps(fixture_checkpoint()));
  const nn::TensorMap both = random_inputs(2, 3, 8, 8, 5);
  for (const std::vector<float>& fps : {std::vector<float>{1}, std::vector<float>{0, 1}}) {
    nn::TensorMap batch = both;
    batch["fps"] = Tensor::from_vector(fps, {int64_t(fps.size())}).to(DType::i64);
    const Tensor sample = model->forward(batch).at("sample");
    for (int64_t b = 0; b < 2; ++b) {
      nn::TensorMap one = both;
      for (const char* name : {"hidden_states", "encoder_hidden_states", "timestep"})
        one[name] = both.at(name).narrow(0, b, 1).contiguous();
      one["fps"] = Tensor::from_vector({fps[fps.size() == 1 ? 0 : size_t(b)]}, {1}).to(DType::i64);
      // Same arithmetic on rows of a GEMM of another height: equal up to its rounding.
      EXPECT_LT(relative_error(sample.narrow(0, b, 1), model->forward(one).at("sample")), kRelative)
          << "item " << b << " of " << fps.size() << " fps";
    }
  }
  // The fps projection is really added: the other fps moves the sample.
  nn::TensorMap a = both, b = both;
  a["fps"] = Tensor::from_vector({0}, {1}).to(DType::i64);
  b["fps"] = Tensor::from_vector({1}, {1}).to(DType::i64);
  const Tensor sa = model->forward(a).at("sample");
  EXPECT_GT(relative_error(model->forward(b).at("sample"), sa), 1e-3);
}

// Blocks of 2 latent frames: the first block sees only itself, so its output equals the model run
// on those 2 frames alone (RoPE positions and per-frame timesteps are the same), while the later
// block sees the first. Without the rule (blocks of 1 frame: full attention) the first block changes.
TEST(SkyReelsV2, BlockCausalFramesSeeOnlyThemselvesAndThePast) {
  const nn::TensorMap four = random_inputs(1, 4, 8, 8, 7);
  nn::TensorMap two = four;
  two["hidden_states"] = four.at("hidden_states").narrow(2, 0, 2).contiguous();
  two["timestep"] = four.at("timestep").narrow(1, 0, 2).contiguous();
  for (int64_t frames_per_block : {2, 1}) {
    auto model = load_skyreels_v2(testing::with_frames_per_block(fixture_checkpoint(), frames_per_block));
    const Tensor first_block = model->forward(four).at("sample").narrow(2, 0, 2).contiguous();
    const Tensor alone = model->forward(two).at("sample");
    if (frames_per_block == 2)
      EXPECT_LT(relative_error(first_block, alone), kRelative) << "first block of 2 frames";
    else
      EXPECT_GT(relative_error(first_block, alone), 1e-3) << "full attention sees later frames";
  }
}

TEST(SkyReelsV2, RefusesBadInputs) {
  auto model = load_skyreels_v2(fixture_checkpoint());
  auto inputs = fixture_inputs();
  inputs["timestep"] = Tensor::from_vector({900, 620}, {1, 2}).to(DType::i64);  // 2 timesteps for 3 frames
  EXPECT_THROW(model->forward(inputs), Error);
  inputs = fixture_inputs();
  inputs["fps_typo"] = inputs["timestep"];
  EXPECT_THROW(model->forward(inputs), Error);
  auto with_fps = load_skyreels_v2(testing::with_fps(fixture_checkpoint()));
  EXPECT_THROW(with_fps->forward(fixture_inputs()), Error);  // inject_sample_info needs fps
  auto blocks = load_skyreels_v2(testing::with_frames_per_block(fixture_checkpoint(), 2));
  EXPECT_THROW(blocks->forward(fixture_inputs()), Error);  // 3 frames do not split into blocks of 2
}

}  // namespace
}  // namespace cpdit::models::skyreels_v2
