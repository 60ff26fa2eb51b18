// --dry-run: generate, encode-prompt and decode checked without reading weights — what they would do
// printed (the request with the family's defaults filled in), every missing input named in one line,
// the request refused against the model as the run would refuse it — and nothing written.
#include "support/expect_cli_refused.hpp"
#include "support/model_fixture.hpp"
#include "support/run_cli.hpp"

#include <gtest/gtest.h>

#include <filesystem>

namespace cpdit::pipeline {
namespace {

namespace fs = std::filesystem;
using cpdit::testing::expect_cli_refused;
using cpdit::testing::run_cli;
using cpdit::testing::TempDir;

TEST(DryRun, GeneratePrintsTheRunWithItsDefaultsAndWritesNothing) {
  TempDir dir("dry_run_generate");
  const std::string out = dir.file("fox.webp");
  const auto r = run_cli("generate --preset flux-tiny -p 'a red fox' -s 7 -W 64 -o " + out + " --dry-run");
  ASSERT_EQ(r.code, 0) << r.err;
  // The preset's defaults (4 steps, height 256, its first scheduler) filled in beside what was given.
  EXPECT_EQ(r.out, "would open preset flux-tiny (FluxPipeline)\n"
                   "would make 64x256, 4 steps of euler, seed 7, from the prompt \"a red fox\"\n"
                   "would write " + out + "\n"
                   "dry run: the command checks out; nothing was run or written\n");
  EXPECT_FALSE(fs::exists(out));
  // A video family's plan: its clip length; no output flag names the default output, not written.
  const auto wan = run_cli("generate --preset wan-tiny --steps 2 --dry-run", "", dir.path().string());
  ASSERT_EQ(wan.code, 0) << wan.err;
  EXPECT_NE(wan.out.find("would make a clip of 256x256 x 5 frames, 2 steps of unipc, seed 0, from random embeddings"),
            std::string::npos) << wan.out;
  EXPECT_NE(wan.out.find("would write output.mp4\n"), std::string::npos) << wan.out;
  EXPECT_FALSE(fs::exists(dir.file("output.mp4")));
}

TEST(DryRun, EveryMissingInputIsNamedInOneLine) {
  TempDir dir("dry_run_missing");
  expect_cli_refused("generate -m /nowhere/FLUX.1-dev --embeddings " + dir.file("prompt.safetensors") +
                         " --init-image " + dir.file("a.jpg") + " -o " + dir.file("a.png") + " --dry-run",
                     "not found (3): --embeddings " + dir.file("prompt.safetensors") + ", --init-image " +
                         dir.file("a.jpg") + ", --model /nowhere/FLUX.1-dev",
                     dir.file("a.png"));
  // Without --dry-run the run stops at the first, as before.
  expect_cli_refused("generate -m /nowhere/FLUX.1-dev -p fox -o " + dir.file("a.png"),
                     "--model /nowhere/FLUX.1-dev does not exist");
}

TEST(DryRun, TheRequestIsCheckedAgainstTheModelAsTheRunChecksIt) {
  // What run() refuses before reading weights, a dry run refuses in the same words.
  for (const std::string extra : {"", " --dry-run"}) {
    expect_cli_refused("generate --preset wan-tiny --scheduler euler --steps 1 -o x.mp4" + extra,
                       "--scheduler euler is not for wan");
    expect_cli_refused("generate --preset flux-tiny --steps 1 -o x.mp4" + extra, "this model makes images");
  }
  // A pipeline folder is opened (its configs), not loaded; without text it needs --random-embeddings.
  const std::string folder = cpdit::testing::fixture_dir("flux_pipeline_tiny") + "/pipeline";
  expect_cli_refused("generate -m " + folder + " --steps 2 --dry-run", "no prompt: give --prompt");
  const auto r = run_cli("generate -m " + folder + " --random-embeddings -W 32 -H 32 --dry-run");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("would open " + folder + " (FluxPipeline)\nwould make 32x32, 28 steps of euler"),
            std::string::npos) << r.out;
}

TEST(DryRun, EncodePromptAndDecodeCheckTheirFilesAndWriteNothing) {
  TempDir dir("dry_run_encode_decode");
  const std::string embeddings = dir.file("prompt.safetensors");
  const auto encode = run_cli("encode-prompt --preset flux-tiny -p fox -o " + embeddings + " --dry-run");
  ASSERT_EQ(encode.code, 0) << encode.err;
  EXPECT_EQ(encode.out, "would encode \"fox\" (512 tokens at most) with the text encoders of preset flux-tiny\n"
                        "would write " + embeddings + "\ndry run: the command checks out; nothing was run or written\n");
  EXPECT_FALSE(fs::exists(embeddings));
  expect_cli_refused("encode-prompt -m /nowhere/FLUX.1-dev -p fox -o " + embeddings + " --dry-run",
                     "not found: --model /nowhere/FLUX.1-dev", embeddings);

  // The fixture pipeline's latents (its VAE: 4 channels, 2 pixels a latent) decode; a preset's
  // 16-channel ones do not, and the dry run says so as the run would.
  const std::string folder = cpdit::testing::fixture_dir("flux_pipeline_tiny") + "/pipeline";
  const std::string latents = dir.file("latents.safetensors"), other = dir.file("other.safetensors");
  ASSERT_EQ(run_cli("generate -m " + folder + " --random-embeddings --steps 1 -W 32 -H 32 -o " + latents).code, 0);
  const auto decode = run_cli("decode -m " + folder + " --latents " + latents + " -o " + dir.file("a.png") + " --dry-run");
  ASSERT_EQ(decode.code, 0) << decode.err;
  EXPECT_EQ(decode.out, "would decode the (1, 4, 16, 16) latents of " + latents + " with the VAE of " + folder +
                            "/vae on 1 rank\nwould write " + dir.file("a.png") +
                            "\ndry run: the command checks out; nothing was run or written\n");
  EXPECT_FALSE(fs::exists(dir.file("a.png")));
  ASSERT_EQ(run_cli("generate --preset flux-tiny --steps 1 -W 32 -H 32 --text-tokens 8 -o " + other).code, 0);
  expect_cli_refused("decode -m " + folder + " --latents " + other + " -o " + dir.file("a.png") + " --dry-run",
                     "holds (1, 16, 4, 4) latents, but the VAE of " + folder + " takes 4 channels (latent_channels)");
  expect_cli_refused("decode -m " + folder + " --latents " + dir.file("none.safetensors") + " -o " +
                         dir.file("a.png") + " --dry-run",
                     "not found: --latents " + dir.file("none.safetensors"));
}

}  // namespace
}  // namespace cpdit::pipeline
