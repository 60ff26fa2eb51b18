// WanTransformer3DModel against diffusers' own numbers (tests/data/fixtures/wan_tiny).
#include "models/wan_fixture.hpp"

#include <cpdit/core/error.hpp>

#include <gtest/gtest.h>

namespace cpdit::models::wan {
namespace {

using testing::fixture_checkpoint;
using testing::fixture_inputs;

// The fixture README: float32 and float64 runs differ by <= 3e-6 absolute on outputs of magnitude 2
// to 5, and the usual porting mistakes move the output by 9% or more of its range.
constexpr double kTolerance = 1e-4;

TEST(Wan, SampleAndIntermediatesMatchDiffusers) {
  auto model = load_wan(fixture_checkpoint());
  cpdit::testing::expect_forward_matches(*model, fixture_inputs(), "sample",
                                         cpdit::testing::fixture_file(testing::kFixture, "expected").at("sample"),
                                         testing::wan_intermediates(testing::kFixture), max_abs_diff, kTolerance);
}

TEST(Wan, ConfigIsInferredFromTheTensors) {
  auto state = cpdit::testing::fixture_state_dict(testing::kFixture);
  WanConfig c = WanConfig::infer(state);
  EXPECT_EQ(c.in_channels, 4);
  EXPECT_EQ(c.out_channels, 4);
  EXPECT_EQ(c.patch_size, (std::array<int64_t, 3>{1, 2, 2}));
  EXPECT_EQ(c.text_dim, 16);
  EXPECT_EQ(c.freq_dim, 256);
  EXPECT_EQ(c.ffn_dim, 32);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_TRUE(c.cross_attn_norm);
  EXPECT_THROW(c.validate(), Error);  // width 24 cannot be told apart into heads: config.json must say
  EXPECT_EQ(fixture_checkpoint().config.inner_dim(), 24);
}

TEST(Wan, RefusesBadInputs) {
  auto model = load_wan(fixture_checkpoint());
  auto inputs = fixture_inputs();
  inputs.erase("timestep");
  EXPECT_THROW(model->forward(inputs), Error);
  inputs = fixture_inputs();
  inputs["encoder_hidden_states_image"] = inputs["encoder_hidden_states"];
  EXPECT_THROW(model->forward(inputs), Error);
  inputs = fixture_inputs();
  inputs["hidden_states"] = Tensor::zeros({1, 4, 2, 15, 16});  // rows not a multiple of the patch
  EXPECT_THROW(model->forward(inputs), Error);
  inputs = fixture_inputs();
  inputs["hidden_states"] = Tensor::zeros({1, 4, 2, 66, 16});  // 33 rows of patches > rope_max_seq_len 32
  EXPECT_THROW(model->forward(inputs), Error);
}

// A per-token timestep that is the same everywhere equals the (B,) timestep (up to the rounding of
// GEMMs of another shape).
TEST(Wan, UniformPerTokenTimestepEqualsTheBatchTimestep) {
  auto model = load_wan(fixture_checkpoint());
  auto inputs = fixture_inputs();
  Tensor want = model->forward(inputs).at("sample");
  inputs["timestep"] = Tensor::full({1, 128}, inputs["timestep"].data<float>()[0]);
  EXPECT_LT(max_abs_diff(model->forward(inputs).at("sample"), want), 1e-5);
}

TEST(Wan, UnpatchifyPlacesEachChannel) {
  // One token per (f, h, w) patch, 2 channels, patch (1, 2, 2): channel ((pt*2 + ph)*2 + pw)*2 + c.
  const std::array<int64_t, 3> patch{1, 2, 2}, grid{2, 1, 3};
  Tensor tokens = Tensor::empty({1, 6, 8});
  float* t = tokens.data<float>();
  for (int64_t i = 0; i < 48; ++i) t[i] = float(i);
  Tensor out = unpatchify(tokens, patch, grid);
  ASSERT_EQ(out.shape(), (Shape{1, 2, 2, 2, 6}));
  const float* o = out.data<float>();
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t f = 0; f < 2; ++f)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t w = 0; w < 6; ++w) {
          int64_t token = f * 3 + w / 2, channel = ((h % 2) * 2 + w % 2) * 2 + c;
          EXPECT_EQ(o[((c * 2 + f) * 2 + h) * 6 + w], float(token * 8 + channel));
        }
}

}  // namespace
}  // namespace cpdit::models::wan
