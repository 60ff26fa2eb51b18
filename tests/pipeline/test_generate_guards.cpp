// `cpdit generate` refusing what would run wrong or destroy a file: numeric options as typed (no
// wrapped seeds, truncated counts, NaN guidance or silent defaults for 0), a scheduler config of
// another class, a second transformer without its boundary, an output that names an input, and a
// transformer whose output turns NaN (an error naming the step, and with --check-finite the module).
// More rank threads than cores are not refused, but warned about.
#include "support/expect_cli_refused.hpp"
#include "support/run_cli.hpp"

#include <cpdit/core/threads.hpp>
#include <cpdit/io/safetensors.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

namespace cpdit::pipeline {
namespace {

using cpdit::testing::run_cli;
using cpdit::testing::TempDir;

const std::string kFluxTiny = std::string(CPDIT_TEST_DATA) + "/fixtures/flux_tiny";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Exit code 2, one line on stderr holding `message`, nothing written to `out`. The models here have
// no text encoders: random embeddings stand for the text.
void expect_refused(const std::string& args, const std::string& message, const std::string& out) {
  const auto r = cpdit::testing::expect_cli_refused("generate --random-embeddings " + args, message, out);
  // CLI11's own range check printed the largest double as 309 digits.
  EXPECT_LT(r.err.size(), 300u) << args << "\n" << r.err;
}

TEST(GenerateGuards, NumericOptionsAreCheckedAsTyped) {
  TempDir dir("generate_numbers");
  const std::string out = dir.file("never.safetensors");
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases{
      {"--guidance nan", "--guidance: must be a finite number, got nan"},
      {"--guidance inf", "--guidance: must be a finite number, got inf"},
      {"--guidance -inf", "must be a finite number"},
      {"--height 0", "--height: must be >= 1, got 0"},
      {"--width 0", "--width: must be >= 1, got 0"},
      {"--seed -2", "--seed: must be >= -1, got -2"},  // -1 draws a seed at random
      {"--seed 1.5", "--seed: must be a whole number >= -1, got 1.5"},
      {"--seed 9223372036854775808", "--seed: must be at most 9223372036854775807"},
      {"--steps 1.5", "--steps: must be a whole number >= 1, got 1.5"},
      {"--steps 0", "--steps: must be >= 1"},
      {"--steps 1e30", "--steps: must be a whole number"},
      {"--text-tokens 99999999999999999999", "--text-tokens: must be at most 9223372036854775807"},
      {"--ranks -5", "--ranks: must be >= 1, got -5"},
      {"--threads 0", "--threads: must be >= 1, got 0"},
      {"--ring 1000", "1000 local ranks are more threads than this machine can usefully run"},
  };
  for (const Case& c : cases)
    expect_refused("--preset flux-tiny --steps 1 --out " + out + " " + c.args, c.message, out);
  expect_refused("--preset wan-tiny --steps 1 --frames -1 --out " + out, "--frames: must be >= 1, got -1", out);
  expect_refused("--preset wan-tiny --steps 1 --frames 0 --out " + out, "--frames: must be >= 1, got 0", out);
}

TEST(GenerateGuards, MoreRankThreadsThanCoresRunWithAWarning) {
  TempDir dir("generate_oversubscribed");
  const std::string out = dir.file("out.safetensors");
  const int cores = hardware_threads();
  const std::string run = "generate --preset flux-tiny --steps 1 --height 32 --width 48 --text-tokens 8 --out " + out;
  const auto over = run_cli(run + " --threads 1 --ranks " + std::to_string(cores + 1));
  ASSERT_EQ(over.code, 0) << over.err;
  EXPECT_NE(over.err.find("cpdit: warning: " + std::to_string(cores + 1) + " local ranks of 1 thread need " +
                          std::to_string(cores + 1) + " cores and this machine has " + std::to_string(cores) +
                          ": ranks sharing cores run slower than --ranks " + std::to_string(cores) + " would"),
            std::string::npos)
      << over.err;
  const auto fits = run_cli(run + " --threads 1 --ranks " + std::to_string(cores));
  ASSERT_EQ(fits.code, 0) << fits.err;
  EXPECT_EQ(fits.err.find("warning"), std::string::npos) << fits.err;
}

TEST(GenerateGuards, ARunThatCannotFitIsRefusedWithTheEstimate) {
  TempDir dir("generate_memory");
  const std::string out = dir.file("never.safetensors");
  // 125000 x 125000 latents of 16 channels: 1 TB of f32 for the latents alone, more than any host here.
  expect_refused("--preset flux-tiny --steps 1 --height 1000000 --width 1000000 --out " + out,
                 "this run needs at least", out);
  expect_refused("--preset flux-tiny --steps 1 --height 1000000 --width 1000000 --out " + out, "of memory is available",
                 out);
  expect_refused("--preset wan-tiny --steps 1 --frames 400001 --height 4096 --width 4096 --out " + out,
                 "this run needs at least", out);
}

TEST(GenerateGuards, ASchedulerConfigOfAnotherClassIsRefused) {
  TempDir dir("generate_scheduler_class");
  const std::string out = dir.file("never.safetensors");
  // The transformer's own config.json, given where the scheduler's belongs.
  expect_refused("--model " + kFluxTiny + "/weights.safetensors --steps 1 --height 32 --width 32 --scheduler-config " +
                     kFluxTiny + "/config.json --out " + out,
                 "the scheduler config is a FluxTransformer2DModel config, not a FlowMatchEulerDiscreteScheduler one",
                 out);
}

TEST(GenerateGuards, ASecondTransformerWithoutABoundaryIsRefused) {
  // wan_pipeline_tiny with a transformer_2/ beside its transformer/, as Wan 2.2 A14B's folders have it, but
  // its model_index.json's boundary_ratio null: which steps the second one takes is not known.
  TempDir dir("generate_two_experts");
  const std::filesystem::path pipeline = dir.file("pipeline");
  std::filesystem::copy(std::string(CPDIT_TEST_DATA) + "/fixtures/wan_pipeline_tiny/pipeline", pipeline,
                        std::filesystem::copy_options::recursive);
  std::filesystem::copy(pipeline / "transformer", pipeline / "transformer_2", std::filesystem::copy_options::recursive);
  const std::string out = dir.file("never.safetensors");
  expect_refused("--model " + pipeline.string() + " --frames 5 --height 48 --width 32 --steps 1 --out " + out,
                 "needs a WanTransformer3DModel and a boundary_ratio in (0, 1]", out);
}

// A folder of a pipeline cpdit does not run names itself and the ones it runs; a folder whose
// model_index.json names another family than its transformer is refused before anything loads.
TEST(GenerateGuards, AFolderOfAnotherPipelineIsRefusedByName) {
  TempDir dir("generate_other_pipeline");
  const std::filesystem::path pipeline = dir.file("pipeline");
  std::filesystem::copy(std::string(CPDIT_TEST_DATA) + "/fixtures/flux_pipeline_tiny/pipeline", pipeline,
                        std::filesystem::copy_options::recursive);
  const std::string out = dir.file("never.safetensors");
  std::ofstream(pipeline / "model_index.json") << R"({"_class_name": "StableDiffusionXLPipeline"})";
  expect_refused("--model " + pipeline.string() + " --steps 1 --height 32 --width 32 --out " + out,
                 "pipeline 'StableDiffusionXLPipeline' is not supported; cpdit runs: FluxPipeline", out);
  std::ofstream(pipeline / "model_index.json") << R"({"_class_name": "WanPipeline"})";
  expect_refused("--model " + pipeline.string() + " --steps 1 --height 32 --width 32 --out " + out,
                 "holds a WanPipeline whose transformer is a FluxTransformer2DModel", out);
}

TEST(GenerateGuards, AnOutputNamingAnInputIsRefusedAndTheInputKept) {
  TempDir dir("generate_overwrite");
  std::filesystem::copy_file(kFluxTiny + "/weights.safetensors", dir.file("diffusion_pytorch_model.safetensors"));
  std::filesystem::copy_file(kFluxTiny + "/config.json", dir.file("config.json"));
  std::filesystem::create_hard_link(dir.file("diffusion_pytorch_model.safetensors"), dir.file("linked.safetensors"));
  const auto noise =
      run_cli("generate --preset flux-tiny --steps 1 --height 32 --width 32 --out " + dir.file("noise.safetensors"));
  ASSERT_EQ(noise.code, 0) << noise.err;
  const std::string weights = slurp(dir.file("diffusion_pytorch_model.safetensors")),
                    latents = slurp(dir.file("noise.safetensors"));

  const std::string model = "--model " + dir.path().string() + " --steps 1 --height 32 --width 32";
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases{
      {model + " --out " + dir.file("diffusion_pytorch_model.safetensors"), "is the file --model reads"},
      {model + " --out " + dir.path().string() + "/./diffusion_pytorch_model.safetensors", "is the file --model reads"},
      {model + " --out " + dir.file("linked.safetensors"), "is the file --model reads"},
      {model + " --preview " + dir.file("config.json"), "is the file --model reads"},
      {"--preset flux-tiny --steps 1 --embeddings " + dir.file("noise.safetensors") + " --out " +
           dir.file("noise.safetensors"),
       "is the file --embeddings reads"},
      {"--preset flux-tiny --steps 1 --out " + dir.file("same.safetensors") + " --preview " + dir.file("same.safetensors"),
       "--out and --preview name the same file"},
  };
  for (const Case& c : cases) {
    auto r = run_cli("generate " + c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << "\n" << r.err;
  }
  EXPECT_EQ(slurp(dir.file("diffusion_pytorch_model.safetensors")), weights);
  EXPECT_EQ(slurp(dir.file("noise.safetensors")), latents);
  EXPECT_FALSE(std::filesystem::exists(dir.file("same.png")));
}

TEST(GenerateGuards, ConfigSizesAreWholeAndWithinTheCheckpoint) {
  TempDir dir("generate_config_sizes");
  const std::string out = dir.file("never.safetensors");
  const std::string config = slurp(kFluxTiny + "/config.json");
  const std::string layers = "\"num_layers\": 1,";
  ASSERT_NE(config.find(layers), std::string::npos);
  struct Case {
    std::string value, message;
  };
  const std::vector<Case> cases{{"1.5", "num_layers must be a whole number, got 1.5"},
                                {"1e30", "num_layers is out of range, got 1e+30"},
                                {"1000000000", "num_layers is 1000000000 but the checkpoint has weights for 1"}};
  for (const Case& c : cases) {
    std::string edited = config;
    edited.replace(edited.find(layers), layers.size(), "\"num_layers\": " + c.value + ",");
    std::ofstream(dir.file("config.json")) << edited;
    expect_refused("--model " + kFluxTiny + "/weights.safetensors --config " + dir.file("config.json") +
                       " --steps 1 --height 32 --width 32 --out " + out,
                   c.message, out);
  }
}

// flux_tiny with one NaN in the last single block's output projection: the transformer's output is
// NaN from the first step on.
std::string nan_checkpoint(const TempDir& dir) {
  auto weights = io::load_safetensors(kFluxTiny + "/weights.safetensors");
  Tensor poisoned = weights.at("single_transformer_blocks.0.proj_out.weight").to(DType::f32).clone();
  poisoned.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
  weights["single_transformer_blocks.0.proj_out.weight"] = poisoned;
  io::save_safetensors(dir.file("diffusion_pytorch_model.safetensors"), weights);
  std::filesystem::copy_file(kFluxTiny + "/config.json", dir.file("config.json"));
  return dir.path().string();
}

TEST(GenerateGuards, ANaNOutputStopsAtItsStepInsteadOfWritingNaNLatents) {
  TempDir dir("generate_nan");
  const std::string model = nan_checkpoint(dir), out = dir.file("never.safetensors");
  for (const char* ranks : {"1", "2"}) {
    const std::string args = "--model " + model + " --steps 3 --height 32 --width 32 --ranks " + ranks;
    expect_refused(args + " --out " + out, "denoise step 1: the transformer's output holds NaN or Inf", out);
    expect_refused(args + " --check-finite --out " + out,
                   "denoise step 1: module single_transformer_blocks.0.proj_out was the first to output NaN or Inf",
                   out);
  }
}

}  // namespace
}  // namespace cpdit::pipeline
