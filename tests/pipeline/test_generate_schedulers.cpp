// `cpdit generate --scheduler`: FLUX.1's whole pipeline with DPM++ 2M against diffusers' FluxPipeline with
// its scheduler replaced by DPMSolverMultistepScheduler.from_config(..., use_flow_sigmas=True,
// prediction_type="flow_prediction") (tests/data/fixtures/schedulers/flux_dpm.safetensors, made by
// tools/reference/schedulers.py on tests/data/fixtures/flux_pipeline_tiny), every split equal to one rank (the
// ancestral sampler's noise too), the picture naming the scheduler that ran, and the refusals.
#include "support/expect_cli_refused.hpp"
#include "support/run_cli.hpp"

#include <cpdit/io/png.hpp>
#include <cpdit/io/safetensors.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace cpdit::pipeline {
namespace {

namespace fs = std::filesystem;
using cpdit::testing::expect_cli_refused;
using cpdit::testing::run_cli;
using cpdit::testing::TempDir;

const fs::path kCase = fs::path(CPDIT_TEST_DATA) / "fixtures" / "flux_pipeline_tiny";
const fs::path kExpected = fs::path(CPDIT_TEST_DATA) / "fixtures" / "schedulers" / "flux_dpm.safetensors";

// The fixture's run without its step count.
std::string flux_run(const std::string& flags) {
  const std::string inputs = (kCase / "inputs.safetensors").string();
  return "generate --model " + (kCase / "pipeline").string() + " --embeddings " + inputs + " --latents " + inputs +
         " --guidance 3.5 --height 32 --width 32 " + flags;
}

std::string flux_args(const std::string& flags) { return flux_run("--steps 3 " + flags); }

Tensor final_latents(const std::string& flags, bool steps = true) {
  TempDir dir("generate_schedulers");
  const std::string out = dir.file("out.safetensors");
  const auto r = run_cli((steps ? flux_args(flags) : flux_run(flags)) + " --out " + out);
  EXPECT_EQ(r.code, 0) << flags << "\n" << r.err;
  return r.code == 0 ? io::load_safetensors(out).at("latents") : Tensor();
}

// diffusers' float32 run and ours differ by the transformer's summation order over 3 steps (the default
// scheduler's run of this fixture shows up to 1e-5 on latents of magnitude 5, test_pipeline_parity.cpp) and
// by libm's exp/log against torch's in the scheduler (< 1e-6, test_schedulers.cpp); observed 2.9e-6.
constexpr double kLatentsTolerance = 1e-5;

TEST(GenerateSchedulers, FluxDpmSolverFinalLatentsAreDiffusers) {
  const Tensor expected = io::load_safetensors(kExpected.string()).at("latents");
  const Tensor one = final_latents("--scheduler dpm++2m --ranks 1");
  const double error = max_abs_diff(one, expected);
  std::printf("FLUX.1 dpm++2m, 3 steps: max |cpdit - diffusers| %.3g\n", error);
  EXPECT_LT(error, kLatentsTolerance);
  // The same run under the default scheduler is another: the flag took effect.
  EXPECT_GT(max_abs_diff(final_latents("--ranks 1"), expected), 0.1);
}

// Each rank steps its shard of the latents with its own scheduler; DPM++ 2M keeps per-token history only.
// Ulysses 2 splits the heads and keeps each head's sums whole; ring 2 splits the keys (online softmax):
// both within float32 rounding of one rank, 1e-6 on latents of magnitude 5.
TEST(GenerateSchedulers, DpmSolverEverySplitIsOneRank) {
  const Tensor one = final_latents("--scheduler dpm++2m --ranks 1 --threads 1");
  for (const std::string split : {"--ulysses 2", "--ring 2"}) {
    const double error = max_abs_diff(final_latents("--scheduler dpm++2m --threads 1 " + split), one);
    std::printf("dpm++2m %s against 1 rank: %.3g\n", split.c_str(), error);
    EXPECT_LT(error, 1e-6) << split;
  }
}

// Euler ancestral's noise is drawn for the whole latents from the seed and sharded like them: the ranks
// draw the same values one rank draws, so splits agree as with any scheduler; a new seed changes the run.
TEST(GenerateSchedulers, EulerAncestralNoiseIsTheSameOnEverySplit) {
  const Tensor one = final_latents("--sampler euler_a --seed 5 --ranks 1 --threads 1");
  for (const std::string split : {"--ulysses 2", "--ring 2"}) {
    const double error = max_abs_diff(final_latents("--sampler euler_a --seed 5 --threads 1 " + split), one);
    std::printf("euler_a %s against 1 rank: %.3g\n", split.c_str(), error);
    EXPECT_LT(error, 1e-6) << split;
  }
  EXPECT_GT(max_abs_diff(final_latents("--sampler euler_a --seed 6 --ranks 1 --threads 1"), one), 0.1);
  EXPECT_GT(max_abs_diff(final_latents("--seed 5 --ranks 1 --threads 1"), one), 0.1);  // not Euler's
}

TEST(GenerateSchedulers, ThePictureNamesTheSchedulerThatRan) {
  TempDir dir("generate_schedulers_png");
  const std::string png = dir.file("out.png");
  const auto r = run_cli("generate --preset flux-tiny --steps 2 --height 32 --width 32 --text-tokens 8 --threads 1 "
                         "--scheduler dpm++2m -o " + png);
  ASSERT_EQ(r.code, 0) << r.err;
  const io::PictureText text = io::read_png_text(png);
  ASSERT_EQ(text.size(), 1u);
  const std::string& parameters = text[0].second;
  EXPECT_NE(parameters.find("Steps: 2, Sampler: DPM++ 2M, "), std::string::npos) << parameters;
}

TEST(GenerateSchedulers, SigmasSetTheStepsAndAreDiffusersSigmasArgument) {
  // Three custom sigmas are three steps; --steps 3 with them is the same run, --steps 4 is refused.
  const Tensor sigmas = final_latents("--sigmas 1.0,0.6,0.3", false);
  EXPECT_EQ(max_abs_diff(final_latents("--sigmas 1.0,0.6,0.3 --steps 3", false), sigmas), 0.0);
  EXPECT_GT(max_abs_diff(sigmas, final_latents("")), 1e-3);
  expect_cli_refused(flux_run("--sigmas 1.0,0.6,0.3 --steps 4"), "--steps 4 with 3 --sigmas");
}

TEST(GenerateSchedulers, RefusesUnknownNamesAndBadSigmasBeforeAnyModel) {
  // A name no family takes: refused while the flags are read, naming every family's choices.
  expect_cli_refused("generate --model /nonexistent --scheduler bogus",
                     "--scheduler bogus is unknown; the choices are flux: euler (default), euler_a, dpm++2m");
  // A name this family does not take: refused before the transformer is opened.
  expect_cli_refused(flux_args("--scheduler unipc"), "--scheduler unipc is not for flux; it takes euler (default)");
  expect_cli_refused("generate --preset wan-tiny --scheduler euler_a", "is not for wan; it takes unipc (default), dpm++2m");
  expect_cli_refused("generate --model /nonexistent --sigmas 1.0,x", "\"x\" (value 2) is not a number");
  expect_cli_refused("generate --model /nonexistent --sigmas ''", "holds no values");
  expect_cli_refused(flux_args("--sigmas 0.5,1.0"), "--sigmas must descend: 1 (value 2) follows 0.5");
  expect_cli_refused(flux_args("--scheduler dpm++2m --sigmas 1.0,0.5"), "--sigmas is not for dpm++2m");
}

TEST(GenerateSchedulers, HelpListsTheChoicesInWordsAndEachFamilysDefault) {
  const auto r = run_cli("generate --help");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const std::string said : {"--scheduler", "--sampler", "dpm++2m (DPM++ 2M", "euler_a (Euler ancestral",
                                 "flux: euler (default), euler_a, dpm++2m", "wan: unipc (default), dpm++2m",
                                 "--flow-shift", "--sigmas"})
    EXPECT_NE(r.out.find(said), std::string::npos) << said << "\n" << r.out;
}

}  // namespace
}  // namespace cpdit::pipeline
