// `cpdit generate --first-image/--last-image` from PNG files: SkyReels-V2 image-to-video by diffusion
// forcing against diffusers' SkyReelsV2DiffusionForcingImageToVideoPipeline on the same PNGs
// (tests/data/fixtures/skyreels_df_i2v, tools/reference/skyreels_df_i2v_pipeline.py), and Wan 2.1 I2V
// and FLF2V against WanImageToVideoPipeline, SkyReels-V2 I2V against SkyReelsV2ImageToVideoPipeline
// (tests/data/fixtures/wan_i2v_pipeline,
// tools/reference/wan_i2v_pipeline.py): the images are read, encoded by the pipeline's VAE (and CLIP)
// and normalised by the command itself. And images it refuses.
#include "support/read_mp4.hpp"
#include "support/expect_cli_refused.hpp"
#include "support/run_cli.hpp"

#include <cpdit/io/safetensors.hpp>
#include <cpdit/nn/module.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

namespace cpdit::pipeline {
namespace {

using cpdit::testing::run_cli;
using cpdit::testing::TempDir;

const std::string kData = std::string(CPDIT_TEST_DATA) + "/fixtures/";
const std::string kImage = kData + "skyreels_df_i2v/";
const std::string kPipeline = kData + "skyreels_df_tiny/pipeline";

// The fixture's first_last case (13 frames, ar_step 1, guidance 5 on its negative embeddings, causal
// blocks of one frame) on the tiny diffusion-forcing pipeline, from diffusers' initial noise.
std::string first_last_args() {
  return "generate --model " + kPipeline + " --config " + kImage + "transformer_config.json --embeddings " + kImage +
         "inputs.safetensors --latents " + kImage + "first_last/latents.safetensors --frames 13 --height 48 --width 32 "
         "--steps 3 --ar-step 1 --guidance 5 --fps 24 --first-image " + kImage + "first.png --last-image " + kImage +
         "last.png";
}

// As SkyReelsImageToVideo's bound (test_skyreels_image_to_video.cpp): summation order only, here also
// through the VAE encoder's (its latents within 1e-5 of diffusers', SkyReelsImageToVideo.
// ImageLatentsAreThePipelines); the images left out move the latents by O(0.1) or more
// (SkyReelsImageToVideo.ImagesMatter, on these latents).
constexpr double kLatentsTolerance = 1e-4;

TEST(GenerateImageToVideo, FirstAndLastImageFromPngsEqualDiffusersSplitOverTwoRanks) {
  TempDir dir("generate_i2v");
  const std::string out = dir.file("clip.safetensors"), mp4 = dir.file("clip.mp4");
  const auto r = run_cli(first_last_args() + " --ring 2 --out " + out + " --video " + mp4 + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nn::TensorMap got = io::load_safetensors(out);
  const Tensor want = io::load_safetensors(kImage + "first_last/expected.safetensors").at("latents");
  ASSERT_EQ(got.at("latents").shape(), want.shape());  // the last image's frame left out
  EXPECT_LT(max_abs_diff(got.at("latents"), want), kLatentsTolerance);
  // The clip decoded from those latents: 13 frames, written at the --fps the model was told. (Its
  // colours are not compared: these frames sit near saturation, where H.264's limited range moves a
  // frame's mean by more than the io tests' bound; the decode itself is the pipeline tests'.)
  ASSERT_EQ(got.at("video").shape(), (Shape{1, 13, 48, 32, 3}));
  const cpdit::testing::DecodedVideo mp4_video = cpdit::testing::read_mp4(mp4);
  EXPECT_EQ(mp4_video.rgb.size(), 13u);
  EXPECT_EQ(mp4_video.fps, 24.0);
  EXPECT_EQ(mp4_video.width, 32);
  EXPECT_EQ(mp4_video.height, 48);
}

const std::string kWanImage = kData + "wan_i2v_pipeline/";

// A wan_i2v_pipeline case from diffusers' initial noise and 512-token embeddings, on `layout`.
std::string wan_image_args(const std::string& name, const std::string& layout) {
  const std::string last = name == "first_last" ? " --last-image " + kWanImage + "last.png" : "";
  return "generate --model " + kWanImage + name + "/pipeline --embeddings " + kWanImage +
         "inputs.safetensors --latents " + kWanImage + "inputs.safetensors --frames 9 --height 48 --width 32 "
         "--steps 3 --first-image " + kWanImage + "first.png" + last + " " + layout;
}

TEST(GenerateImageToVideo, WanAndSkyReelsFromPngsEqualDiffusersSplit) {
  // As WanImageToVideo's bound (test_wan_image_to_video.cpp): summation order only (observed ~1e-5),
  // here also through the VAE encoder and CLIP, each within 3e-6 of diffusers'.
  using Case = std::pair<std::string, std::string>;  // case, layout
  for (const auto& [name, layout] :
       {Case{"first", "--ring 2"}, Case{"first_last", "--ulysses 2"},
        Case{"skyreels_first", "--cfg-parallel 2 --ring 2"}}) {
    TempDir dir("generate_wan_i2v");
    const std::string out = dir.file("clip.safetensors");
    const auto r = run_cli(wan_image_args(name, layout) + " --threads 1 --out " + out + " --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const Tensor got = io::load_safetensors(out).at("latents");
    const Tensor want = io::load_safetensors(kWanImage + name + "/expected.safetensors").at("latents");
    ASSERT_EQ(got.shape(), want.shape()) << name;
    EXPECT_LT(max_abs_diff(got, want), kLatentsTolerance) << name;
    ASSERT_EQ(io::load_safetensors(out).at("video").shape(), (Shape{1, 9, 48, 32, 3})) << name;
  }
}

// Exit code 2 and one line on stderr holding `message`, nothing written.
void expect_refused(const std::string& args, const std::string& message) {
  TempDir dir("generate_i2v_refused");
  const std::string out = dir.file("never.safetensors");
  cpdit::testing::expect_cli_refused(args + " --out " + out, message, out);
}

TEST(GenerateImageToVideo, RefusesImagesItCannotUse) {
  const std::string run = "generate --model " + kPipeline + " --embeddings " + kImage +
                          "inputs.safetensors --frames 5 --height 48 --width 32 --steps 1";
  expect_refused(run + " --first-image " + kImage + "missing.png", "missing.png");
  expect_refused(run + " --first-image " + kImage + "first_last/case.json", "is not a PNG, JPEG or WebP file");
  expect_refused(run + " --last-image " + kImage + "last.png", "--last-image goes with --first-image");
  // Wan 2.1 text-to-video: no way to take an image.
  const std::string wan = kData + "wan_pipeline_tiny/";
  expect_refused("generate --model " + wan + "pipeline --embeddings " + wan +
                     "inputs.safetensors --frames 5 --height 48 --width 32 --steps 1 --first-image " + kImage + "first.png",
                 "--first-image is for Wan 2.1 and SkyReels-V2 image-to-video");
  // Wan 2.1 image-to-video: the first image is needed; a first-last-frame model needs both, the other one.
  auto wan_run = [&](const std::string& name) {
    return "generate --model " + kWanImage + name + "/pipeline --embeddings " + kWanImage +
           "inputs.safetensors --frames 9 --height 48 --width 32 --steps 1";
  };
  const std::string first_png = " --first-image " + kWanImage + "first.png";
  expect_refused(wan_run("first"), "give the clip's first frame with --first-image");
  expect_refused(wan_run("first") + first_png + " --last-image " + kWanImage + "last.png",
                 "--last-image needs a first-last-frame model");
  expect_refused(wan_run("first_last") + first_png, "give --last-image too");
}

}  // namespace
}  // namespace cpdit::pipeline
