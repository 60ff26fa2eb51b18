// SkyReels-V2 image-to-video by diffusion forcing against diffusers'
// SkyReelsV2DiffusionForcingImageToVideoPipeline (tests/data/fixtures/skyreels_df_i2v,
// tools/reference/skyreels_df_i2v_pipeline.py), started from diffusers' own normalised image latents and
// fed its random draws in its order: a first and a last image on a short clip, and a first image on a
// long clip with noise added to the prefixes; on one rank and split. And the image as the pipeline's
// video processor makes it from the PNG, and its latents as the pipeline's VAE makes them.
#include "pipeline/skyreels_case.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/pipeline/skyreels_image.hpp>
#include <cpdit/pipeline/skyreels_pipeline.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>
#include <utility>

namespace cpdit::pipeline {
namespace {

namespace fs = std::filesystem;
const fs::path kImage = fs::path(CPDIT_TEST_DATA) / "fixtures" / "skyreels_df_i2v";
const fs::path kPipeline = fs::path(CPDIT_TEST_DATA) / "fixtures" / "skyreels_df_tiny" / "pipeline";

// As the long-video bound (test_skyreels_long_video.cpp): diffusers' float32 and ours differ in
// summation order only (observed gaps of a few 1e-6 on latents of magnitude 5-7); an image latent left
// out, or the last image's frame stepped, moves them by O(0.1) or more (SkyReelsImageToVideo.ImagesMatter).
constexpr double kLatentsTolerance = 1e-4;

using testing::Split;

// The fixture's transformer with blocks of one latent frame, as the pipeline ran it (causal_block_size 1).
const models::skyreels_v2::SkyReelsV2Checkpoint& checkpoint() {
  static const auto ck = models::skyreels_v2::read_skyreels_v2_checkpoint(
      (kPipeline / "transformer").string(), (kImage / "transformer_config.json").string());
  return ck;
}

// Case `name` on cfg x ring x ulysses local ranks, its images' latents given (or left out when
// `with_images` is false; the draws then still fit a case without added noise): rank 0's final latents.
Tensor image_to_video(const std::string& name, Split split, bool with_images = true) {
  const nlohmann::json c = io::read_json((kImage / name / "case.json").string());
  const nn::TensorMap inputs = io::load_safetensors((kImage / "inputs.safetensors").string());
  const nn::TensorMap draws = io::load_safetensors((kImage / name / "noise.safetensors").string());
  EXPECT_EQ(int64_t(draws.size()), c["draws"].get<int64_t>());
  const UniPCConfig scheduler = UniPCConfig::from_file((kPipeline / "scheduler" / "scheduler_config.json").string());
  SkyReelsGenerateOptions options = testing::case_options(c, inputs);
  if (with_images) {
    options.first_image_latents = inputs.at("condition").narrow(0, 0, 1);
    if (c["last"]) options.last_image_latents = inputs.at("condition").narrow(0, 1, 1);
  }
  return testing::generate_on_ranks(checkpoint(), scheduler, inputs.at("prompt_embeds"), options, draws, split);
}

Tensor expected(const std::string& name) {
  return io::load_safetensors((kImage / name / "expected.safetensors").string()).at("latents");
}

// A first and a last image, ar_step 1 so blocks start one step apart, guidance 5: the last image's frame
// is fed at timestep 0 on every model call and left out of the result.
TEST(SkyReelsImageToVideo, FirstAndLastImageEqualDiffusersOnOneRankAndSplit) {
  const Tensor want = expected("first_last");
  ASSERT_EQ(want.shape(), (Shape{1, 4, 4, 6, 4}));
  for (Split split : {Split{1, 1, 1}, Split{1, 2, 1}, Split{2, 1, 1}}) {
    const Tensor got = image_to_video("first_last", split);
    ASSERT_EQ(got.shape(), want.shape());
    EXPECT_LT(max_abs_diff(got, want), kLatentsTolerance)
        << "cfg " << split.cfg << " ring " << split.ring << " ulysses " << split.ulysses;
  }
}

// A long clip from a first image with addnoise_condition 20: the image is the first chunk's prefix,
// fed noised like a later chunk's overlap.
TEST(SkyReelsImageToVideo, LongClipFromFirstImageEqualsDiffusersOnOneRankAndSplit) {
  const Tensor want = expected("first_long");
  ASSERT_EQ(want.shape(), (Shape{1, 4, 12, 6, 4}));
  for (Split split : {Split{1, 1, 1}, Split{1, 1, 2}}) {
    const Tensor got = image_to_video("first_long", split);
    ASSERT_EQ(got.shape(), want.shape());
    EXPECT_LT(max_abs_diff(got, want), kLatentsTolerance) << "ring " << split.ring << " ulysses " << split.ulysses;
  }
}

// The images are what the test above checks: the same run from noise alone lands far away.
TEST(SkyReelsImageToVideo, ImagesMatter) {
  const Tensor without = image_to_video("first_last", {1, 1, 1}, /*with_images=*/false);
  EXPECT_GT(max_abs_diff(without, expected("first_last")), 0.1);
}

TEST(SkyReelsImageToVideo, RefusesImageLatentsOfAnotherShape) {
  const nlohmann::json c = io::read_json((kImage / "first_last" / "case.json").string());
  const nn::TensorMap inputs = io::load_safetensors((kImage / "inputs.safetensors").string());
  auto model = models::skyreels_v2::load_skyreels_v2(checkpoint());
  const UniPCConfig scheduler = UniPCConfig::from_file((kPipeline / "scheduler" / "scheduler_config.json").string());
  SkyReelsGenerateOptions options = testing::case_options(c, inputs);
  options.first_image_latents = Tensor::zeros({1, 4, 1, 5, 4});  // 5 latent rows; the clip has 6
  EXPECT_THROW(generate_skyreels_v2(*model, checkpoint().config, scheduler, inputs.at("prompt_embeds"), options), Error);
  options.first_image_latents = Tensor::zeros({1, 4, 4, 6, 4});  // the whole clip: nothing left to make
  EXPECT_THROW(generate_skyreels_v2(*model, checkpoint().config, scheduler, inputs.at("prompt_embeds"), options), Error);
}

// The PNG as the pipeline's video processor hands it to the VAE: bit for bit, at its own size and
// resized (PIL's Lanczos) to sizes that stretch, shrink, and do one of each (tools/reference/image_resize.py).
TEST(SkyReelsImageToVideo, ImagePixelsAreThePipelines) {
  const Tensor pixels = io::load_safetensors((kImage / "inputs.safetensors").string()).at("pixels");
  EXPECT_EQ(max_abs_diff(image_pixels((kImage / "first.png").string(), 48, 32), pixels.narrow(0, 0, 1)), 0.0);
  EXPECT_EQ(max_abs_diff(image_pixels((kImage / "last.png").string(), 48, 32), pixels.narrow(0, 1, 1)), 0.0);
  const fs::path resize = fs::path(CPDIT_TEST_DATA) / "fixtures" / "image_resize";
  const nn::TensorMap resized = io::load_safetensors((resize / "pixels.safetensors").string());
  for (auto [height, width] : {std::pair{48, 32}, std::pair{16, 24}, std::pair{24, 48}}) {
    const Tensor& want = resized.at("lanczos_" + std::to_string(height) + "x" + std::to_string(width));
    EXPECT_EQ(max_abs_diff(image_pixels((resize / "source.png").string(), height, width), want), 0.0)
        << height << "x" << width;
  }
  EXPECT_THROW(image_pixels((kImage / "first_last" / "case.json").string(), 48, 32), Error);  // not a PNG
}

// The images through the pipeline's Wan VAE as its prepare_latents makes them: each a one-frame video,
// the posterior's mode, normalised by latents_mean/std.
TEST(SkyReelsImageToVideo, ImageLatentsAreThePipelines) {
  const nn::TensorMap inputs = io::load_safetensors((kImage / "inputs.safetensors").string());
  const models::LoadedModel vae = models::open_model((kPipeline / "vae").string(), std::nullopt, {});
  const Tensor latents = image_latents(vae, inputs.at("pixels"));
  ASSERT_EQ(latents.shape(), inputs.at("condition").shape());
  // The encoder's f32 sums in another order than PyTorch's (observed ~1e-6 on latents of magnitude
  // ~2); a wrong normalisation or the posterior's log-variance half instead of its mean moves them by O(1).
  EXPECT_LT(max_abs_diff(latents, inputs.at("condition")), 1e-5);
  // A VAE that is not a Wan VAE is refused.
  const models::LoadedModel transformer = models::open_model(kPipeline.string(), std::nullopt, {});
  EXPECT_THROW(image_latents(transformer, inputs.at("pixels")), Error);
}

}  // namespace
}  // namespace cpdit::pipeline
