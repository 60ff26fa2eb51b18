// `cpdit generate` from a prompt to pixels in stages (pipeline/stages.hpp) on the presets' built-in
// tokenizers, seeded random text encoders and VAEs: the encode stage feeds the loop exactly what
// encode-prompt writes, each stage frees its weights before the next, the decoded outputs are the same
// under every split, and misuse is one line with nothing written.
#include "support/read_png.hpp"
#include "support/expect_cli_refused.hpp"
#include "support/run_cli.hpp"

#include <cpdit/io/safetensors.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <string>

namespace cpdit::pipeline {
namespace {

namespace fs = std::filesystem;
using cpdit::testing::expect_cli_refused;
using cpdit::testing::run_cli;
using cpdit::testing::TempDir;

const std::string kFlux = "generate --preset flux-tiny --steps 2 --height 32 --width 48 --text-tokens 16 --seed 5";
const std::string kWan =
    "generate --preset wan-tiny --steps 2 --frames 5 --height 32 --width 32 --text-tokens 16 --seed 5";

std::map<std::string, Tensor> generate(const TempDir& dir, const std::string& args, const std::string& name) {
  const std::string out = dir.file(name + ".safetensors");
  const auto r = run_cli(args + " --threads 1 --out " + out);
  EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
  return r.code == 0 ? io::load_safetensors(out) : std::map<std::string, Tensor>{};
}

// The prompt through the encode stage gives the loop what encode-prompt writes for the same preset
// and seed: the same latents and pixels, bit for bit (the same code on the same inputs). `prompt` is
// the prompt flags, both commands'.
void expect_prompt_is_its_embeddings(const std::string& args, const std::string& preset, const std::string& pixels,
                                     const std::string& prompt = " --prompt 'a red fox in the snow'") {
  TempDir dir("generate_prompt");
  const auto from_prompt = generate(dir, args + prompt, "prompt");
  const std::string embeddings = dir.file("embeddings.safetensors");
  const auto e = run_cli("encode-prompt --preset " + preset + " --max-sequence-length 16" + prompt +
                         " --out " + embeddings);
  ASSERT_EQ(e.code, 0) << e.err;
  const auto from_file = generate(dir, args + " --embeddings " + embeddings, "file");
  ASSERT_TRUE(from_prompt.count(pixels) && from_file.count(pixels));
  EXPECT_EQ(max_abs_diff(from_prompt.at("latents"), from_file.at("latents")), 0.0);
  EXPECT_EQ(max_abs_diff(from_prompt.at(pixels), from_file.at(pixels)), 0.0);
  // And the prompt matters: another one gives other latents.
  const auto other = generate(dir, args + " --prompt 'a blue whale'", "other");
  ASSERT_TRUE(other.count("latents"));
  EXPECT_GT(max_abs_diff(from_prompt.at("latents"), other.at("latents")), 1e-3);
}

TEST(GenerateStages, FluxPromptIsWhatEncodePromptWrites) {
  expect_prompt_is_its_embeddings(kFlux, "flux-tiny", "image");
}

TEST(GenerateStages, WanPromptIsWhatEncodePromptWrites) {
  // Wan encodes the default negative prompt "" too, and guidance runs on it.
  expect_prompt_is_its_embeddings(kWan, "wan-tiny", "video");
}

// FLUX.1 true CFG from a prompt: the encode stage adds the negative pair, which the loop combines.
TEST(GenerateStages, FluxNegativePromptIsWhatEncodePromptWrites) {
  const std::string prompt = " --prompt 'a red fox in the snow' --negative-prompt 'blurry'";
  expect_prompt_is_its_embeddings(kFlux + " --true-cfg-scale 2.5", "flux-tiny", "image", prompt);
  // And true CFG ran: without the negative prompt (FluxPipeline then skips it) the latents differ.
  TempDir dir("generate_negative");
  const auto guided = generate(dir, kFlux + " --true-cfg-scale 2.5" + prompt, "guided");
  const auto plain = generate(dir, kFlux + " --true-cfg-scale 2.5 --prompt 'a red fox in the snow'", "plain");
  ASSERT_TRUE(guided.count("latents") && plain.count("latents"));
  EXPECT_GT(max_abs_diff(guided.at("latents"), plain.at("latents")), 1e-3);
}

TEST(GenerateStages, EachStageFreesItsWeightsAndTheSummaryTimesEach) {
  TempDir dir("generate_stage_memory");
  const auto r = run_cli(kFlux + " --prompt 'a red fox' --threads 1 --json --image " + dir.file("fox.png"));
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json s = nlohmann::json::parse(r.out);
  const nlohmann::json& stages = s.at("stages");
  ASSERT_EQ(stages.size(), 3u) << s.dump();
  int64_t largest = 0;
  const char* names[] = {"encode", "denoise", "decode"};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(stages[i].at("name"), names[i]);
    EXPECT_GT(stages[i].at("seconds").get<double>(), 0.0);
    EXPECT_GT(stages[i].at("weight_bytes").get<int64_t>(), 0) << names[i] << " loads its own model";
    // Nothing a stage loaded is still held when the next one starts: the peak is one stage's.
    EXPECT_EQ(stages[i].at("weight_bytes_after").get<int64_t>(), 0) << names[i];
    largest = std::max(largest, stages[i].at("weight_bytes").get<int64_t>());
  }
  EXPECT_EQ(s.at("weight_bytes_resident").get<int64_t>(), largest);
  // The denoise stage's activations are its ranks' peaks (not the preset's weights, which were made as
  // plain tensors on the main thread before they became weights).
  int64_t rank_sum = 0;
  for (const auto& peak : s.at("peak_activation_bytes_per_rank")) rank_sum += peak.get<int64_t>();
  EXPECT_EQ(stages[1].at("activation_bytes").get<int64_t>(), rank_sum);
  const auto png = cpdit::testing::read_png(dir.file("fox.png"));
  EXPECT_EQ(png.height, 32);
  EXPECT_EQ(png.width, 48);
}

TEST(GenerateStages, ProgressAndSummaryNameEachStage) {
  TempDir dir("generate_stage_progress");
  const auto r = run_cli(kFlux + " --prompt 'a red fox' --threads 1 --verbose --image " + dir.file("fox.png"));
  ASSERT_EQ(r.code, 0) << r.err;
  // stderr is not a terminal here: one progress line per event.
  for (const char* line : {"encode done in", "denoise step 1/2", "denoise step 2/2", "decode done in"})
    EXPECT_NE(r.err.find(line), std::string::npos) << line << " in:\n" << r.err;
  for (const char* line : {"stage        encode ", "stage        denoise ", "stage        decode "})
    EXPECT_NE(r.out.find(line), std::string::npos) << line << " in:\n" << r.out;
}

// The summary leads with what was asked; the engine's detail waits for --verbose.
TEST(GenerateStages, SummaryLeadsWithTheRequest) {
  TempDir dir("generate_summary");
  const auto r = run_cli(kFlux + " --prompt 'a red fox' -n 'blurry' --threads 1 -o " + dir.file("fox.png"));
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* line : {"prompt       a red fox\n", "negative     blurry\n", "seed 5\n", "steps of flow-match Euler",
                           "wrote        " })
    EXPECT_NE(r.out.find(line), std::string::npos) << line << " in:\n" << r.out;
  EXPECT_EQ(r.out.find("stage   "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("parallelism"), std::string::npos) << r.out;
  // The scheduler named is the one that ran, not the family's default.
  const auto dpm = run_cli(kFlux + " --prompt 'a red fox' --scheduler dpm++2m --threads 1 -o " + dir.file("dpm.png"));
  ASSERT_EQ(dpm.code, 0) << dpm.err;
  EXPECT_NE(dpm.out.find("steps of DPM++ 2M"), std::string::npos) << dpm.out;
}

// Every split of the prompt-to-pixels run decodes what one rank decodes: the latents differ by
// summation order (1e-6 here) and the row-split decode is exact up to that; 1e-4, the bound of every
// split's latents in the parity tests, leaves a wide margin.
TEST(GenerateStages, EverySplitDecodesWhatOneRankDecodes) {
  TempDir dir("generate_stage_splits");
  for (const auto& [args, pixels] : {std::pair{kFlux, "image"}, std::pair{kWan, "video"}}) {
    const auto single = generate(dir, args + " --prompt 'a red fox' --ranks 1", "single");
    ASSERT_TRUE(single.count(pixels)) << args;
    // 6 ranks: more than the 4 latent rows, so the decode runs on the first 4.
    for (const std::string split : {"--ring 2", "--ulysses 2", "--ring 2 --ulysses 2", "--ring 3", "--ranks 6"}) {
      const auto split_run = generate(dir, args + " --prompt 'a red fox' " + split, "split");
      ASSERT_TRUE(split_run.count(pixels)) << args << " " << split;
      EXPECT_LT(max_abs_diff(split_run.at(pixels), single.at(pixels)), 1e-4) << args << " " << split;
      EXPECT_LT(max_abs_diff(split_run.at("latents"), single.at("latents")), 1e-4) << args << " " << split;
    }
  }
}

// generate's decode split by a Wan video's latent frames (--vae-split frames) decodes what one rank
// decodes, within the bound above.
TEST(GenerateStages, AWanVideoSplitByFramesDecodesWhatOneRankDecodes) {
  TempDir dir("generate_stage_frames");
  const auto single = generate(dir, kWan + " --prompt 'a red fox' --ranks 1", "single");
  const auto frames = generate(dir, kWan + " --prompt 'a red fox' --ranks 2 --vae-split frames", "frames");
  ASSERT_TRUE(single.count("video") && frames.count("video"));
  EXPECT_LT(max_abs_diff(frames.at("video"), single.at("video")), 1e-4);
}


TEST(GenerateStages, MisuseIsOneLineAndNothingWritten) {
  TempDir dir("generate_stage_errors");
  const std::string png = dir.file("a.png"), frames = dir.file("frames");
  expect_cli_refused(kWan + " --image " + png, "--image is for images", png);
  expect_cli_refused(kFlux + " --frames-dir " + frames, "--frames-dir is for video", frames);
  expect_cli_refused(kFlux + " --prompt a --embeddings x.safetensors --image " + png, "not both", png);
  expect_cli_refused(kFlux + " --negative-prompt a --image " + png, "--negative-prompt goes with --prompt", png);
  const std::string latents = dir.file("a.safetensors");
  expect_cli_refused(kWan + " --true-cfg-scale 2 --out " + latents, "Wan's classifier-free guidance is --guidance",
                        latents);
  // Qwen-Image's schedule needs 2 steps and its pipeline at most 1024 text tokens: refused before its
  // Qwen-Image-width weights are built.
  expect_cli_refused("generate --preset qwen-mini --steps 1 --out " + png, "use at least 2 steps", png);
  expect_cli_refused("generate --preset qwen-mini --prompt a --text-tokens 1025 --out " + png,
                     "--text-tokens (max_sequence_length) is at most 1024 for Qwen-Image", png);
  // A pipeline folder without text encoders or a transformer file without a VAE.
  const std::string folder = std::string(CPDIT_TEST_DATA) + "/fixtures/flux_pipeline_tiny/pipeline";
  expect_cli_refused("generate --model " + folder + " --prompt a --height 32 --width 32 --image " + png,
                        "has no tokenizer/ and text_encoder/", png);
  const std::string transformer = std::string(CPDIT_TEST_DATA) + "/fixtures/flux_tiny/weights.safetensors";
  expect_cli_refused("generate --model " + transformer + " --image " + png, "need the pipeline's VAE", png);
}

}  // namespace
}  // namespace cpdit::pipeline

namespace cpdit {
namespace {

// qwen-mini's built-in Qwen2 tokenizer and one-layer Qwen2.5-VL encoder: the prompt and the default
// negative prompt " " as the pipeline encodes them, at the transformer's text width. The built-in
// tokenizer has no merges, so each byte of the template is a token: the template with "a fox" makes 167
// tokens (5 of them the chat tokens) and the pipeline drops the first 34; " " makes 163.
TEST(GenerateStages, EncodePromptOnQwenMiniRunsItsBuiltInEncoder) {
  cpdit::testing::TempDir dir("encode_prompt_qwen");
  const std::string out = dir.file("x.safetensors");
  const auto r = cpdit::testing::run_cli("encode-prompt --preset qwen-mini --prompt 'a fox' --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto got = io::load_safetensors(out);
  EXPECT_EQ(got.at("prompt_embeds").shape(), (Shape{1, 167 - 34, 3584}));
  EXPECT_EQ(got.at("negative_prompt_embeds").shape(), (Shape{1, 163 - 34, 3584}));
  EXPECT_EQ(got.count("prompt_embeds_mask"), 0u) << "one prompt: every token real, no mask";
}

}  // namespace
}  // namespace cpdit
