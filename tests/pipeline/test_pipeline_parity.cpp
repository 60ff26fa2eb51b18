// `cpdit generate` on diffusers pipeline folders saved by save_pretrained (tiny transformer + VAE +
// scheduler): FluxPipeline (tests/data/fixtures/flux_pipeline_tiny, tools/reference/flux_pipeline.py;
// initial packed noise, 3 steps at guidance 3.5, and with true CFG 2.5 on negative embeddings), WanPipeline
// with classifier-free guidance (wan_pipeline_tiny, tools/reference/wan_pipeline.py; negative embeddings,
// 3 steps at guidance 5.0) and QwenImagePipeline (qwenimage_pipeline_tiny, tools/reference/qwenimage_pipeline.py;
// padded prompt mask, negative pair, Qwen-Image's schedule with shift_terminal, true CFG 4.0 with the norm
// rescale, and without CFG), and LTXPipeline (ltx_pipeline_tiny, tools/reference/ltx_pipeline.py; from
// the prompt through the folder's T5, padded text masks, LTX-Video's schedule, CFG 3.0, the
// timestep-conditioned VAE).
// Given diffusers' embeddings and initial latents, the final latents and the decoded image or video
// are diffusers' on one rank and under every split, CFG-parallel rank groups (--cfg-parallel 2) included, and every
// split decodes what one rank decodes.
#include "support/read_mp4.hpp"
#include "support/read_png.hpp"
#include "support/expect_cli_refused.hpp"
#include "support/pipeline_outputs.hpp"
#include "support/run_cli.hpp"

#include <cpdit/comm/local.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/models/registry.hpp>
#include <cpdit/pipeline/vae_decode.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

namespace cpdit::pipeline {
namespace {

namespace fs = std::filesystem;
using cpdit::testing::run_cli;
using cpdit::testing::TempDir;
using cpdit::testing::expect_outputs_on_every_split;
using cpdit::testing::kLatentsTolerance;
using cpdit::testing::kPixelsTolerance;
using cpdit::testing::kSplitTolerance;

const fs::path kCase = fs::path(CPDIT_TEST_DATA) / "fixtures" / "flux_pipeline_tiny";
const fs::path kWanCase = fs::path(CPDIT_TEST_DATA) / "fixtures" / "wan_pipeline_tiny";
const fs::path kQwenCase = fs::path(CPDIT_TEST_DATA) / "fixtures" / "qwenimage_pipeline_tiny";
const fs::path kLtxCase = fs::path(CPDIT_TEST_DATA) / "fixtures" / "ltx_pipeline_tiny";

// The CFG exchange adds no rounding: with no split inside the two groups and one compute thread in
// both runs (so the kernels sum in the same order), --cfg-parallel 2 makes one rank's latents bit for bit.
void expect_cfg_parallel_is_one_rank_exactly(const std::string& args) {
  TempDir dir("cfg_exact");
  const std::string one = dir.file("one.safetensors"), two = dir.file("two.safetensors");
  ASSERT_EQ(run_cli(args + " --ranks 1 --threads 1 --out " + one).code, 0);
  const auto r = run_cli(args + " --cfg-parallel 2 --threads 1 --out " + two);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(max_abs_diff(io::load_safetensors(two).at("latents"), io::load_safetensors(one).at("latents")), 0.0);
}

// Each byte of `png` against round(255 x) of picture `index` of `pixels` (..., H, W, 3): the pixels
// are within 4e-6 of diffusers' (kPixelsTolerance), so a byte may land one step away where a value
// sits on a rounding boundary, never more.
void expect_png_is_pixels(const std::string& png, const Tensor& pixels, int64_t index) {
  const cpdit::testing::RgbImage image = cpdit::testing::read_png(png);
  ASSERT_EQ(image.height, pixels.size(-3)) << png;
  ASSERT_EQ(image.width, pixels.size(-2)) << png;
  const Tensor flat = pixels.contiguous();
  const float* p = flat.data<float>() + index * image.height * image.width * 3;
  int worst = 0;
  for (size_t i = 0; i < image.rgb.size(); ++i)
    worst = std::max(worst, std::abs(int(image.rgb[i]) - int(std::nearbyint(p[i] * 255.0f))));
  EXPECT_LE(worst, 1) << png;
}

// generate on a case's pipeline folder with diffusers' embeddings (its inputs.safetensors), initial
// latents from `latents_file` (the same file unless given), and the run's own flags.
std::string case_args(const fs::path& case_dir, const std::string& flags, const std::string& latents_file = "") {
  const std::string inputs = (case_dir / "inputs.safetensors").string();
  return "generate --model " + (case_dir / "pipeline").string() + " --embeddings " + inputs + " --latents " +
         (latents_file.empty() ? inputs : latents_file) + " " + flags;
}

std::string flux_args(const std::string& latents_file = "") {
  return case_args(kCase, "--steps 3 --guidance 3.5 --height 32 --width 32", latents_file);
}

TEST(FluxPipelineParity, FinalLatentsAndImageMatchDiffusersOnEverySplit) {
  // The transformer has 2 heads: Ulysses up to 2, ring any count; the decode splits 16 latent rows.
  expect_outputs_on_every_split(kCase, flux_args(), "image",
                                {"--ranks 1", "--ring 2", "--ulysses 2", "--ring 3", "--ring 2 --ulysses 2"});
}

// FluxPipeline's true_cfg_scale: a second call on negative_prompt_embeds / negative_pooled_prompt_embeds,
// combined without rescale; the guidance embedding still gets 3.5 in both calls.
TEST(FluxPipelineParity, TrueCfgFinalLatentsMatchDiffusersOnEverySplit) {
  expect_outputs_on_every_split(kCase, flux_args() + " --true-cfg-scale 2.5", "",
                                {"--ranks 1", "--ulysses 2", "--ring 3"}, "latents_true_cfg");
}

std::string wan_args() { return case_args(kWanCase, "--steps 3 --frames 5 --height 48 --width 32"); }

TEST(WanPipelineParity, GuidedFinalLatentsAndVideoMatchDiffusersOnEverySplit) {
  // No --guidance: WanPipeline's default 5.0 must be the one applied. 2 heads, 12 video tokens; the
  // decode splits 6 latent rows.
  expect_outputs_on_every_split(kWanCase, wan_args(), "video",
                                {"--ranks 1", "--ring 2", "--ulysses 2", "--ring 2 --ulysses 2", "--ring 3"});
}

TEST(FluxPipelineParity, PngIsDiffusersImageInEightBits) {
  TempDir dir("flux_pipeline_png");
  const std::string png = dir.file("image.png");
  const auto r = run_cli(flux_args() + " --ring 2 --image " + png);
  ASSERT_EQ(r.code, 0) << r.err;
  const Tensor expected = io::load_safetensors((kCase / "expected.safetensors").string()).at("image");
  expect_png_is_pixels(png, expected, 0);
}

TEST(WanPipelineParity, FramesDirHoldsDiffusersFramesInEightBits) {
  TempDir dir("wan_pipeline_frames");
  const fs::path frames = dir.path() / "frames";  // created by generate; named as a folder, "frames/"
  const auto r = run_cli(wan_args() + " --ring 2 --frames-dir " + frames.string() + "/");
  ASSERT_EQ(r.code, 0) << r.err;
  const Tensor expected = io::load_safetensors((kWanCase / "expected.safetensors").string()).at("video");
  const int64_t count = expected.size(1);
  for (int64_t f = 0; f < count; ++f) {
    char name[32];
    std::snprintf(name, sizeof name, "frame_%05lld.png", (long long)f);
    expect_png_is_pixels((frames / name).string(), expected, f);
  }
  EXPECT_FALSE(fs::exists(frames / "frame_00005.png")) << "5 frames, no more";
}

std::string qwenimage_args() { return case_args(kQwenCase, "--steps 3 --height 32 --width 32"); }

// No --true-cfg-scale: QwenImagePipeline's default 4.0 must be the one applied. 2 heads, 64 image and 9
// text tokens (3 of them padding), so ring 3 splits both streams unevenly.
TEST(QwenImagePipelineParity, TrueCfgFinalLatentsAndImageMatchDiffusersOnEverySplit) {
  expect_outputs_on_every_split(kQwenCase, qwenimage_args(), "image",
                                {"--ranks 1", "--ring 2", "--ulysses 2", "--ring 3", "--ring 2 --ulysses 2"});
}

TEST(QwenImagePipelineParity, WithoutCfgFinalLatentsMatchDiffusers) {
  expect_outputs_on_every_split(kQwenCase, qwenimage_args() + " --true-cfg-scale 1", "", {"--ranks 1", "--ring 2"},
                                "latents_no_cfg");
}

// CFG-parallel true CFG with the norm rescale: the two passes on two rank groups (ring 2 inside each
// on 4 ranks) are diffusers' and one rank's; with no split inside the groups, one rank's bit for bit.
TEST(QwenImagePipelineParity, CfgParallelMatchesDiffusersAndOneRank) {
  expect_outputs_on_every_split(kQwenCase, qwenimage_args(), "image",
                                {"--ranks 1", "--cfg-parallel 2", "--cfg-parallel 2 --ring 2"});
  expect_cfg_parallel_is_one_rank_exactly(qwenimage_args());
}

TEST(QwenImagePipelineParity, GuidanceFlagsOfOtherPipelinesAreRefused) {
  for (const std::string& flag : {std::string("--guidance 3.5"), std::string("--preview p.png")}) {
    const auto r = run_cli(qwenimage_args() + " " + flag);
    EXPECT_EQ(r.code, 2) << flag << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

// generate --video: the decoded Wan video as an MP4 that plays as diffusers' video, from CFG-parallel
// rank groups; an MP4 that would replace an input, or for a FLUX.1 image, is refused before any work.
TEST(WanPipelineParity, VideoIsDiffusersVideoAsAnMp4) {
  TempDir dir("wan_pipeline_mp4");
  const std::string mp4 = dir.file("clip.mp4");
  const auto r = run_cli(wan_args() + " --cfg-parallel 2 --video " + mp4);
  ASSERT_EQ(r.code, 0) << r.err;
  cpdit::testing::expect_mp4_shows_video(
      mp4, io::load_safetensors((kWanCase / "expected.safetensors").string()).at("video"));

  const auto same = run_cli(wan_args() + " --out " + dir.file("same.mp4") + " --video " + dir.file("same.mp4"));
  EXPECT_EQ(same.code, 2) << same.err;
  EXPECT_NE(same.err.find("--video"), std::string::npos) << same.err;
  EXPECT_FALSE(fs::exists(dir.file("same.mp4")));
  const auto flux = run_cli(flux_args() + " --video " + dir.file("flux.mp4"));
  EXPECT_EQ(flux.code, 2) << flux.err;
  EXPECT_NE(flux.err.find("--video is for video"), std::string::npos) << flux.err;
  EXPECT_FALSE(fs::exists(dir.file("flux.mp4")));
}

// CFG-parallel: the conditional and unconditional passes on two rank groups, each split ring x
// Ulysses inside, on 2, 4, 6 and 8 ranks. The latents and video are diffusers' and one rank's.
TEST(WanPipelineParity, CfgParallelMatchesDiffusersAndOneRank) {
  expect_outputs_on_every_split(kWanCase, wan_args(), "video",
                                {"--ranks 1", "--cfg-parallel 2", "--cfg-parallel 2 --ring 2",
                                 "--cfg-parallel 2 --ulysses 2", "--cfg-parallel 2 --ring 3",
                                 "--cfg-parallel 2 --ring 2 --ulysses 2"});
}

TEST(WanPipelineParity, CfgParallelWithoutSplitsIsOneRankExactly) {
  expect_cfg_parallel_is_one_rank_exactly(wan_args());
}

// Expects a one-line error naming `needle`, exit 2, and nothing written.
void expect_one_line_error(const std::string& args, const std::string& needle) {
  TempDir dir("cfg_refused");
  const std::string out = dir.file("out.safetensors");
  cpdit::testing::expect_cli_refused(args + " --out " + out, needle, out);
}

TEST(CfgParallel, RefusedWhereNoClassifierFreeGuidanceRuns) {
  // FLUX.1-dev's guidance is an embedding: there is no unconditional pass to put on a second group.
  expect_one_line_error(flux_args() + " --cfg-parallel 2", "FLUX.1's --guidance is an embedding");
  // Wan with guidance 1 runs one pass, as WanPipeline does.
  expect_one_line_error(wan_args() + " --cfg-parallel 2 --guidance 1", "--guidance is at most 1");
  // Qwen-Image at true_cfg_scale 1 runs one pass, as QwenImagePipeline does.
  expect_one_line_error(qwenimage_args() + " --cfg-parallel 2 --true-cfg-scale 1", "--true-cfg-scale is at most 1");
  // Two groups need an even rank count.
  expect_one_line_error(wan_args() + " --cfg-parallel 2 --ranks 3", "even rank count");
}

TEST(FluxPipelineParity, LatentsOfTheWrongLayoutAreOneLineAndNothingWritten) {
  TempDir dir("flux_pipeline_bad_latents");
  const std::string bad = dir.file("bad.safetensors"), out = dir.file("out.safetensors");
  io::save_safetensors(bad, {{"latents", Tensor::zeros({1, 4, 16, 16})}});  // unpacked, not (1, 64, 16)
  const auto r = run_cli(flux_args(bad) + " --out " + out);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("packed"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(fs::exists(out));

  io::save_safetensors(bad, {{"noise", Tensor::zeros({1, 64, 16})}});
  const auto missing = run_cli(flux_args(bad) + " --out " + out);
  EXPECT_EQ(missing.code, 2) << missing.err;
  EXPECT_NE(missing.err.find("no tensor 'latents'"), std::string::npos) << missing.err;
}

// LTXPipeline from its prompt: the folder's tokenizer and T5 encoder (24 tokens: the prompt's 18 and
// the empty negative prompt's 1 real, the rest padding), diffusers' initial latents, 3 steps.
std::string ltx_args(const std::string& text = "--prompt 'a red fox trotting through snow' --text-tokens 24",
                     const std::string& size = "--frames 9 --height 64 --width 64") {
  return "generate --model " + (kLtxCase / "pipeline").string() + " " + text + " --latents " +
         (kLtxCase / "inputs.safetensors").string() + " --steps 3 " + size;
}

// No --guidance: LTXPipeline's default 3.0 must be the one applied; the video is decoded at its
// default decode_timestep 0. 2 heads; 8 video and 24 text tokens, so ring 3 splits the video
// unevenly and puts the prompt's padding on the last rank only.
TEST(LtxPipelineParity, FromThePromptFinalLatentsAndVideoMatchDiffusersOnEverySplit) {
  expect_outputs_on_every_split(kLtxCase, ltx_args(), "video",
                                {"--ranks 1", "--ring 2", "--ulysses 2", "--ring 3", "--ring 2 --ulysses 2"});
}

// diffusers' own prompt embeddings and masks as --embeddings: the same run.
TEST(LtxPipelineParity, FromEmbeddingsFinalLatentsMatchDiffusers) {
  expect_outputs_on_every_split(kLtxCase, ltx_args("--embeddings " + (kLtxCase / "inputs.safetensors").string()), "",
                                {"--ranks 1", "--ring 3"});
}

// CFG-parallel: the two passes on two rank groups are diffusers' and, with no split inside the
// groups, one rank's bit for bit.
TEST(LtxPipelineParity, CfgParallelMatchesDiffusersAndOneRank) {
  expect_outputs_on_every_split(kLtxCase, ltx_args(), "video",
                                {"--ranks 1", "--cfg-parallel 2", "--cfg-parallel 2 --ring 2",
                                 "--cfg-parallel 2 --ulysses 2"});
  expect_cfg_parallel_is_one_rank_exactly(ltx_args());
}

// encode-prompt on the LTX folder: LTXPipeline.encode_prompt's embeddings (the T5 reads every
// position) and the masks it hands the transformer.
TEST(LtxPipelineParity, EncodePromptIsDiffusersEncodePrompt) {
  TempDir dir("ltx_encode_prompt");
  const std::string out = dir.file("prompt.safetensors");
  const auto r = run_cli("encode-prompt --model " + (kLtxCase / "pipeline").string() +
                         " --prompt 'a red fox trotting through snow' --max-sequence-length 24 --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto got = io::load_safetensors(out);
  const auto expected = io::load_safetensors((kLtxCase / "inputs.safetensors").string());
  for (const char* name : {"prompt_embeds", "negative_prompt_embeds"}) {
    ASSERT_TRUE(got.count(name)) << name;
    // A float32 T5 on the same weights: rounding only (outputs of order 1).
    EXPECT_LT(max_abs_diff(got.at(name), expected.at(name)), 1e-5) << name;
  }
  for (const char* name : {"prompt_attention_mask", "negative_prompt_attention_mask"}) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_EQ(max_abs_diff(got.at(name).to(DType::f32), expected.at(name).to(DType::f32)), 0.0) << name;
  }
}

// --video at LTX-Video's frame rate (25 by default, --fps otherwise) and --frames-dir, from 2 ranks;
// `cpdit decode` turns the latents generate wrote into the same video.
TEST(LtxPipelineParity, VideoFramesAndDecodeShowDiffusersVideo) {
  TempDir dir("ltx_pipeline_video");
  const Tensor expected = io::load_safetensors((kLtxCase / "expected.safetensors").string()).at("video");
  const std::string mp4 = dir.file("clip.mp4"), latents = dir.file("latents.safetensors");
  const fs::path frames = dir.path() / "frames";
  const auto r = run_cli(ltx_args() + " --ring 2 --video " + mp4 + " --frames-dir " + frames.string() + " --out " +
                         latents);
  ASSERT_EQ(r.code, 0) << r.err;
  cpdit::testing::expect_mp4_shows_video(mp4, expected, 25.0);
  for (int64_t f = 0; f < expected.size(1); ++f) {
    char name[32];
    std::snprintf(name, sizeof name, "frame_%05lld.png", (long long)f);
    expect_png_is_pixels((frames / name).string(), expected, f);
  }
  const std::string slow = dir.file("slow.mp4");
  ASSERT_EQ(run_cli(ltx_args() + " --fps 12 --ranks 1 --video " + slow).code, 0);
  EXPECT_EQ(cpdit::testing::read_mp4(slow).fps, 12.0);

  const std::string sample = dir.file("sample.safetensors"), decoded = dir.file("decoded.mp4");
  const auto d = run_cli("decode --model " + (kLtxCase / "pipeline").string() + " --latents " + latents +
                         " --ranks 2 --out " + sample + " --video " + decoded);
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_LT(max_abs_diff(postprocess_pixels(io::load_safetensors(sample).at("sample")), expected), kPixelsTolerance);
  cpdit::testing::expect_mp4_shows_video(decoded, expected, 25.0);
}

// LTX-Video 0.9.1's decode: decode_timestep 0.05 and decode_noise_scale 0.025 with the noise
// diffusers' generator drew, on one rank and with the rows split over two.
TEST(LtxPipelineParity, DecodeAtATimestepWithNoiseIsDiffusers) {
  const models::LoadedModel vae = models::open_model((kLtxCase / "pipeline/vae").string(), std::nullopt, {});
  const auto expected = io::load_safetensors((kLtxCase / "expected.safetensors").string());
  const Tensor noise = io::load_safetensors((kLtxCase / "inputs.safetensors").string()).at("decode_noise");
  for (int ranks : {1, 2}) {
    Tensor sample;
    comm::run_local(ranks, [&](comm::Communicator& world) {
      Tensor mine = decode_latents(vae, expected.at("latents"), world, {0.05f, 0.025f, 0, noise});
      if (world.rank() == 0) sample = mine;
    });
    EXPECT_LT(max_abs_diff(postprocess_pixels(sample), expected.at("video_decode_t")), kPixelsTolerance) << ranks;
  }
}

TEST(LtxPipelineParity, FlagsOfOtherPipelinesAndBadSizesAreOneLineErrors) {
  // From embeddings: no encode stage prints its line before the error.
  const std::string text = "--embeddings " + (kLtxCase / "inputs.safetensors").string();
  expect_one_line_error(ltx_args(text) + " --true-cfg-scale 2", "--true-cfg-scale is for FLUX.1 and Qwen-Image");
  expect_one_line_error(ltx_args(text) + " --image a.png", "--image is for images");
  expect_one_line_error(ltx_args(text) + " --cfg-parallel 2 --guidance 1", "--guidance is at most 1");
  expect_one_line_error(ltx_args(text, "--frames 10 --height 64 --width 64"), "8k + 1");
  expect_one_line_error(ltx_args(text, "--frames 9 --height 48 --width 64"), "multiples of 32");
  // The decode timestep is the LTX VAE's: refused for Wan, in generate and decode alike.
  expect_one_line_error(wan_args() + " --decode-timestep 0.05", "--decode-timestep");
  expect_one_line_error("decode --model " + (kWanCase / "pipeline").string() + " --latents " +
                            (kWanCase / "expected.safetensors").string() + " --decode-timestep 0.05",
                        "--decode-timestep");
}

}  // namespace
}  // namespace cpdit::pipeline
