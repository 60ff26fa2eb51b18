// CLIPVisionModel (Wan 2.1's image-to-video image encoder) against transformers' own numbers
// (tests/data/fixtures/clip_vision_tiny, tools/reference/clip_vision_tiny.py): every hidden state
// transformers' output_hidden_states returns, the pooled output, the tower of a
// CLIPVisionModelWithProjection (SkyReels-V2's), and the inputs it refuses.
#include "models/text_fixture.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/models/registry.hpp>
#include <cpdit/models/text/checkpoint.hpp>

#include <gtest/gtest.h>

namespace cpdit::models::text {
namespace {

using testing::fixture_dir;

const std::string kDir = fixture_dir("clip_vision_tiny");

// Absolute, as the task's outside truth asks (the fixture's values are of magnitude ~1 to 4 after each
// layer norm and residual): transformers' float32 and ours differ in summation order only; an exact
// GELU swapped for quick_gelu, or the class token's position mixed up, moves them by 1e-2 or more.
constexpr double kTolerance = 1e-5;

TEST(ClipVision, EveryHiddenStateAndThePooledOutputEqualTransformers) {
  // Found by the registry from config.json's architectures, the hub's vision_model. prefix stripped.
  const LoadedModel loaded = open_model(kDir + "/weights.safetensors", kDir + "/config.json", {});
  ASSERT_EQ(loaded.class_name, "CLIPVisionModel");
  const std::unique_ptr<nn::Model> model = loaded.replica();
  const nn::TensorMap got = model->forward(io::load_safetensors(kDir + "/inputs.safetensors"));
  const nn::TensorMap want = io::load_safetensors(kDir + "/expected.safetensors");
  for (const auto& [name, expected] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    ASSERT_EQ(got.at(name).shape(), expected.shape()) << name;
    EXPECT_LT(max_abs_diff(got.at(name), expected), kTolerance) << name;
  }
  EXPECT_EQ(got.count(clip_hidden_state_name(4)), 0u);  // 3 layers: hidden states 0 (the embeddings) to 3
}

TEST(ClipVision, AModelWithProjectionRunsItsTower) {
  // wan_i2v_pipeline's SkyReels-V2 image encoder: clip_vision_tiny's tower saved by transformers as a
  // CLIPVisionModelWithProjection, with a visual_projection the pipelines never read.
  const std::string folder = fixture_dir("wan_i2v_pipeline") + "/skyreels_first/pipeline/image_encoder";
  const LoadedModel loaded = open_model(folder, std::nullopt, {});
  ASSERT_EQ(loaded.class_name, "CLIPVisionModelWithProjection");
  const io::ModelFiles without_config{folder + "/model.safetensors", std::nullopt};
  EXPECT_EQ(checkpoint_class(without_config)->name, "CLIPVisionModelWithProjection");  // by tensor names
  EXPECT_EQ(checkpoint_class({kDir + "/weights.safetensors", std::nullopt})->name, "CLIPVisionModel");
  const nn::TensorMap got = loaded.replica()->forward(io::load_safetensors(kDir + "/inputs.safetensors"));
  const nn::TensorMap want = io::load_safetensors(kDir + "/expected.safetensors");
  for (int64_t i = 0; i <= 3; ++i)
    EXPECT_LT(max_abs_diff(got.at(clip_hidden_state_name(i)), want.at(clip_hidden_state_name(i))), kTolerance) << i;
  // The same file read as a plain CLIPVisionModel has a tensor that model does not take.
  EXPECT_THROW(load_clip_vision(read_clip_vision_checkpoint(folder, std::nullopt)), Error);
}

TEST(ClipVision, RefusesPixelsOfAnotherSizeAndUnknownInputs) {
  auto model = load_clip_vision(read_clip_vision_checkpoint(kDir + "/weights.safetensors", kDir + "/config.json"));
  const Tensor pixels = io::load_safetensors(kDir + "/inputs.safetensors").at("pixel_values");
  EXPECT_THROW(model->forward({{"pixel_values", pixels.narrow(2, 0, 28).narrow(3, 0, 28)}}), Error);  // not 42x42
  EXPECT_THROW(model->forward({{"pixel_values", pixels}, {"input_ids", pixels}}), Error);
  EXPECT_THROW(model->forward({}), Error);
}

}  // namespace
}  // namespace cpdit::models::text
