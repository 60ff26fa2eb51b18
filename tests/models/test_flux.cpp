// FluxTransformer2DModel against diffusers' own numbers (tests/data/fixtures/flux_tiny).
#include "models/flux_fixture.hpp"

#include <cpdit/core/error.hpp>

#include <gtest/gtest.h>

namespace cpdit::models::flux {
namespace {

using testing::fixture_checkpoint;
using testing::fixture_inputs;

constexpr double kTolerance = 1e-4;  // the fixture README: common porting mistakes move outputs by >= 9%

TEST(Flux, SampleAndIntermediatesMatchDiffusers) {
  auto model = load_flux(fixture_checkpoint());
  cpdit::testing::expect_forward_matches(*model, fixture_inputs(), "sample",
                                         cpdit::testing::fixture_file(testing::kFixture, "expected").at("sample"),
                                         cpdit::testing::fixture_file(testing::kFixture, "intermediates"), max_abs_diff,
                                         kTolerance);
}

TEST(Flux, ConfigIsInferredFromTheTensors) {
  auto state = cpdit::testing::fixture_state_dict(testing::kFixture);
  FluxConfig c = FluxConfig::infer(state);
  EXPECT_EQ(c.in_channels, 4);
  EXPECT_EQ(c.num_layers, 1);
  EXPECT_EQ(c.num_single_layers, 1);
  EXPECT_EQ(c.attention_head_dim, 16);
  EXPECT_EQ(c.num_attention_heads, 2);
  EXPECT_EQ(c.joint_attention_dim, 32);
  EXPECT_EQ(c.pooled_projection_dim, 32);
  EXPECT_FALSE(c.guidance_embeds);
  EXPECT_EQ(c.axes_dims_rope, (std::vector<int64_t>{16, 56, 56}));  // tensors cannot tell; FLUX.1 default
  EXPECT_THROW(c.validate(), Error);  // which does not fit a head dim of 16
}

TEST(Flux, RefusesMissingAndUnknownInputs) {
  auto model = load_flux(fixture_checkpoint());
  auto inputs = fixture_inputs();
  inputs.erase("txt_ids");
  EXPECT_THROW(model->forward(inputs), Error);
  inputs = fixture_inputs();
  inputs["timesteps"] = inputs["timestep"];
  EXPECT_THROW(model->forward(inputs), Error);
  inputs = fixture_inputs();
  inputs["hidden_states"] = Tensor::zeros({1, 16, 5});
  EXPECT_THROW(model->forward(inputs), Error);
}

TEST(Flux, DeprecatedBatchedIdsGiveTheSameSample) {
  auto model = load_flux(fixture_checkpoint());
  auto inputs = fixture_inputs();
  Tensor want = model->forward(inputs).at("sample");
  inputs["img_ids"] = inputs["img_ids"].reshape({1, 16, 3});
  inputs["txt_ids"] = inputs["txt_ids"].reshape({1, 8, 3});
  EXPECT_EQ(max_abs_diff(model->forward(inputs).at("sample"), want), 0.0);
}

TEST(Flux, ConfigThatDoesNotMatchTheWeightsIsOneError) {
  FluxCheckpoint ck = fixture_checkpoint();
  ck.config.num_layers = 2;
  ck.config.joint_attention_dim = 24;
  try {
    load_flux(ck);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("missing (transformer_blocks.1."), std::string::npos) << msg;
    EXPECT_NE(msg.find("wrongly shaped (context_embedder.weight: expected (32, 24), got (32, 32))"), std::string::npos)
        << msg;
  }
}

}  // namespace
}  // namespace cpdit::models::flux
