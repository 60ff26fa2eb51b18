// LTXVideoTransformer3DModel against diffusers' own numbers: ltx_tiny (sample and every
// intermediate) and ltx_video_per_token (per-token timesteps, padded text, a batch of three).
#include "models/ltx_video_fixture.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/models/registry.hpp>

#include <gtest/gtest.h>

#include <cmath>

namespace cpdit::models::ltx_video {
namespace {

using testing::fixture_checkpoint;
using testing::fixture_inputs;
using testing::fixture_intermediates;
using testing::kRelativeTolerance;
using testing::relative_error;

TEST(LtxVideo, SampleAndIntermediatesMatchDiffusers) {
  auto model = load_ltx_video(fixture_checkpoint());
  const nn::TensorMap expected = fixture_intermediates();
  cpdit::testing::expect_forward_matches(*model, fixture_inputs(), "sample", expected.at("proj_out"), expected,
                                         relative_error, kRelativeTolerance);
}

// A timestep per token (B, S), as LTXConditionPipeline passes it, with text padded in item 1 and
// absent in item 2 (diffusers' −10000 bias then attends to all of it alike). Items 0 and 1 against
// diffusers' float32 run; every item against its float64 run, since in float32 −10000 + logit keeps
// only ~1e-3 of item 2's logits (its float32 sample is 9e-5 of the range off the exact one).
TEST(LtxVideo, PerTokenTimestepsAndPaddedTextMatchDiffusers) {
  auto model = load_ltx_video(fixture_checkpoint());
  const auto expected = cpdit::testing::fixture_file("ltx_video_per_token", "expected");
  const Tensor sample = model->forward(fixture_inputs("ltx_video_per_token")).at("sample");
  ASSERT_EQ(sample.shape(), expected.at("sample").shape());
  EXPECT_LT(relative_error(sample.narrow(0, 0, 2), expected.at("sample").narrow(0, 0, 2)), kRelativeTolerance);
  EXPECT_LT(relative_error(sample, expected.at("sample_float64")), kRelativeTolerance);
}

// (B,), (B, 1) and a per-token (B, S) of one value are the same conditioning.
TEST(LtxVideo, TimestepLayoutsAgree) {
  auto model = load_ltx_video(fixture_checkpoint());
  auto inputs = fixture_inputs();  // timestep (1, 1) = 700
  const Tensor reference = model->forward(inputs).at("sample");
  inputs["timestep"] = Tensor::full({1}, 700.0);
  EXPECT_EQ(max_abs_diff(model->forward(inputs).at("sample"), reference), 0.0);
  inputs["timestep"] = Tensor::full({1, 24}, 700.0);
  EXPECT_LT(relative_error(model->forward(inputs).at("sample"), reference), 1e-6);  // the same arithmetic per row
  inputs["timestep"] = Tensor::full({1}, 300.0);  // and another timestep does move it
  EXPECT_GT(relative_error(model->forward(inputs).at("sample"), reference), 1e-2);
}

// Padded text tokens are hidden from every query: changing them leaves the video alone.
TEST(LtxVideo, PaddedTextDoesNotReachTheVideo) {
  const LtxVideoCheckpoint ck = fixture_checkpoint();
  auto model = load_ltx_video(ck);
  auto inputs = testing::random_inputs(ck.config, {2, 3, 4}, 9, 3, 5);
  const Tensor before = model->forward(inputs).at("sample");
  Tensor text = inputs.at("encoder_hidden_states").clone();
  for (int64_t j = 6; j < 9; ++j)
    for (int64_t c = 0; c < ck.config.caption_channels; ++c)
      text.data<float>()[j * ck.config.caption_channels + c] += 3.0f;
  inputs["encoder_hidden_states"] = text;
  EXPECT_EQ(max_abs_diff(model->forward(inputs).at("sample"), before), 0.0);
  inputs.erase("encoder_attention_mask");  // without the mask the same change does reach it
  EXPECT_GT(max_abs_diff(model->forward(inputs).at("sample"), before), 1e-3);
}

TEST(LtxVideo, ConfigIsInferredFromTheTensors) {
  auto state = cpdit::testing::fixture_state_dict(testing::kFixture);
  const LtxVideoConfig c = LtxVideoConfig::infer(state);
  EXPECT_EQ(c.in_channels, 8);
  EXPECT_EQ(c.out_channels, 8);
  EXPECT_EQ(c.caption_channels, 12);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.cross_attention_dim, 24);  // the width; its 2 x 12 split is config.json's to tell
}

TEST(LtxVideo, RegistryOpensTheFixture) {
  const LoadedModel loaded = open_model(testing::fixture_dir() + "/weights.safetensors",
                                        testing::fixture_dir() + "/config.json", {});
  EXPECT_EQ(loaded.class_name, "LTXVideoTransformer3DModel");
  const Tensor sample = loaded.replica()->forward(fixture_inputs()).at("sample");
  EXPECT_LT(relative_error(sample, fixture_intermediates().at("proj_out")), kRelativeTolerance);
}

TEST(LtxVideo, UnsupportedVariantsAreRefused) {
  LtxVideoConfig c = fixture_checkpoint().config;
  c.norm_elementwise_affine = true;
  EXPECT_THROW(LTXVideoTransformer3DModel{c}, Error);
  c = fixture_checkpoint().config;
  c.cross_attention_dim = 16;  // the caption projection makes text of the inner width, 24
  EXPECT_THROW(LTXVideoTransformer3DModel{c}, Error);
}

TEST(LtxVideo, RefusesBadInputs) {
  auto model = load_ltx_video(fixture_checkpoint());
  auto with = [](const std::string& name, Tensor t) {
    auto inputs = fixture_inputs();
    inputs[name] = std::move(t);
    return inputs;
  };
  auto without = [](const std::string& name) {
    auto inputs = fixture_inputs();
    inputs.erase(name);
    return inputs;
  };
  EXPECT_THROW(model->forward(without("num_frames")), Error);
  EXPECT_THROW(model->forward(without("timestep")), Error);
  EXPECT_THROW(model->forward(with("height", Tensor::full({1}, 4.0, DType::i64))), Error);  // 32 tokens, not 24
  EXPECT_THROW(model->forward(with("width", Tensor::full({1}, 0.0, DType::i64))), Error);
  EXPECT_THROW(model->forward(with("timestep", Tensor::full({1, 5}, 700.0))), Error);  // neither 1 nor 24 per item
  EXPECT_THROW(model->forward(with("encoder_attention_mask", Tensor::full({1, 7}, 1.0, DType::boolean))), Error);
  EXPECT_THROW(model->forward(with("rope_interpolation_scale", Tensor::full({2}, 1.0))), Error);
  EXPECT_THROW(model->forward(with("img_shapes", Tensor::full({1}, 1.0))), Error);  // not an LTX input
  EXPECT_THROW(model->forward(with("hidden_states", Tensor::zeros({1, 24, 7}))), Error);
  EXPECT_THROW(model->forward(with("encoder_hidden_states", Tensor::zeros({1, 0, 12}))), Error);  // no text
  EXPECT_THROW(model->forward(with("timestep", Tensor::full({1}, std::nan("")))), Error);
  // 2^40 x 2^40 x 2^40 wraps around in int64; it must not pass for the 24 tokens.
  EXPECT_THROW(model->forward(with("height", Tensor::full({1}, 1099511627776.0, DType::i64))), Error);
  EXPECT_THROW(model->forward(with("num_frames", Tensor::full({1}, 2.0))), Error);  // a float, not I64
}

}  // namespace
}  // namespace cpdit::models::ltx_video
