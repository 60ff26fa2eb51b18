// `cpdit generate --first-image/--last-image`: SkyReels-V2 image-to-video by diffusion forcing from PNG
// files, against diffusers' SkyReelsV2DiffusionForcingImageToVideoPipeline on the same PNGs
// (tests/data/fixtures/skyreels_df_i2v, tools/reference/skyreels_df_i2v_pipeline.py): the images are
// read, encoded by the pipeline's VAE and normalised by the command itself. And images it refuses.
#include "support/read_mp4.hpp"
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

// Exit code 2 and one line on stderr holding `message`, nothing written.
void expect_refused(const std::string& args, const std::string& message) {
  TempDir dir("generate_i2v_refused");
  const std::string out = dir.file("never.safetensors");
  const auto r = run_cli(args + " --out " + out);
  EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
  EXPECT_NE(r.err.find(message), std::string::npos) << args << "\n" << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\n" << r.err;
  EXPECT_FALSE(std::filesystem::exists(out)) << args;
}

TEST(GenerateImageToVideo, RefusesImagesItCannotUse) {
  const std::string run = "generate --model " + kPipeline + " --embeddings " + kImage +
                          "inputs.safetensors --frames 5 --height 48 --width 32 --steps 1";
  expect_refused(run + " --first-image " + kImage + "missing.png", "missing.png");
  expect_refused(run + " --first-image " + kImage + "first_last/case.json", "as a PNG");
  expect_refused(run + " --last-image " + kImage + "last.png", "--last-image goes with --first-image");
  // Wan 2.1 text-to-video: no way to take an image.
  const std::string wan = kData + "wan_pipeline_tiny/";
  expect_refused("generate --model " + wan + "pipeline --embeddings " + wan +
                     "inputs.safetensors --frames 5 --height 48 --width 32 --steps 1 --first-image " + kImage + "first.png",
                 "--first-image is for SkyReels-V2 diffusion forcing");
}

}  // namespace
}  // namespace cpdit::pipeline
