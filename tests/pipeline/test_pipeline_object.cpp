// A Pipeline opened once runs many requests: each one gives exactly what a separate `cpdit generate`
// run of the same settings writes (bit for bit: the same code on the same inputs), while the model files
// are opened once; a cancelled request stops every rank after the same step, frees what it held, and
// leaves the pipeline usable.
#include "support/expect_error.hpp"
#include "support/model_fixture.hpp"
#include "support/run_cli.hpp"
#include "support/temp_dir.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/core/memory.hpp>
#include <cpdit/core/weight.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/models/registry.hpp>
#include <cpdit/pipeline/pipeline.hpp>

#include <gtest/gtest.h>

#include <atomic>

namespace cpdit::pipeline {
namespace {

using cpdit::testing::fixture_dir;
using cpdit::testing::run_cli;
using cpdit::testing::TempDir;

// The latents a separate `cpdit generate` run writes for `flags`.
Tensor cli_latents(const std::string& flags) {
  TempDir dir("pipeline_object");
  const std::string out = dir.file("out.safetensors");
  // These fixture folders have no text encoders: runs without --embeddings take random ones.
  const auto r = run_cli("generate " + flags + " --random-embeddings --out " + out);
  EXPECT_EQ(r.code, 0) << flags << "\n" << r.err;
  return r.code == 0 ? io::load_safetensors(out).at("latents") : Tensor();
}

PipelineSource folder_source(const std::string& folder) {
  PipelineSource s;
  s.model = folder;
  return s;
}

PipelineSource preset_source(const std::string& name) {
  PipelineSource s;
  s.preset = name;
  return s;
}

Request on_ranks(int ranks) {
  Request r;
  r.random_embeddings = true;  // the fixture folders have no text encoders
  r.parallel.ranks = ranks;
  r.parallel.threads = 1;
  return r;
}

TEST(PipelineObject, TwoFluxRequestsOnOnePipelineAreTwoSeparateRunsAndOpenTheModelOnce) {
  const std::string folder = fixture_dir("flux_pipeline_tiny") + "/pipeline";
  const std::string inputs = fixture_dir("flux_pipeline_tiny") + "/inputs.safetensors";
  const int64_t opened_before = models::models_opened();
  const Pipeline pipe = Pipeline::open(folder_source(folder), LoadPolicy::resident);
  const int64_t opened_by_open = models::models_opened() - opened_before;
  EXPECT_EQ(opened_by_open, 2);  // transformer/ and vae/: this folder has no text encoders
  EXPECT_TRUE(pipe.resident());
  EXPECT_EQ(pipe.family().name(), "flux");

  // diffusers' embeddings and noise at 32x32 on 2 ring ranks...
  Request first = on_ranks(2);
  first.embeddings = io::load_safetensors(inputs);
  first.initial_latents = first.embeddings.at("latents");
  first.steps = 3;
  first.height = 32;
  first.width = 32;
  first.parallel.ring = 2;
  // ...then other (random) embeddings, another size and another seed on one rank.
  Request second = on_ranks(1);
  second.steps = 2;
  second.height = 48;
  second.width = 32;
  second.seed = 3;
  second.text_tokens = 8;
  StageLog log;
  const Result a = pipe.run(first, log);
  const Result b = pipe.run(second, log);
  EXPECT_EQ(models::models_opened() - opened_before, opened_by_open);  // nothing opened again
  EXPECT_EQ(b.request.height, 48);
  EXPECT_EQ(b.latents.size(2) * 32, a.latents.size(2) * 48);  // the second request's size

  const std::string model = "--model " + folder + " --threads 1";
  EXPECT_EQ(max_abs_diff(a.latents, cli_latents(model + " --embeddings " + inputs + " --latents " + inputs +
                                                " --steps 3 --height 32 --width 32 --ring 2")),
            0.0);
  EXPECT_EQ(max_abs_diff(b.latents, cli_latents(model + " --steps 2 --height 48 --width 32 --seed 3 --text-tokens 8 "
                                                        "--ranks 1")),
            0.0);
  // And the two requests did differ.
  EXPECT_NE(a.latents.shape(), b.latents.shape());
}

TEST(PipelineObject, WanRequestsOfOtherFrameCountsOnOnePipelineAreSeparateRuns) {
  const std::string folder = fixture_dir("wan_pipeline_tiny") + "/pipeline";
  const int64_t opened_before = models::models_opened();
  const Pipeline pipe = Pipeline::open(folder_source(folder), LoadPolicy::resident);
  const int64_t opened_by_open = models::models_opened() - opened_before;
  StageLog log;
  for (int64_t frames : {5, 9}) {
    Request r = on_ranks(2);
    r.steps = 2;
    r.frames = frames;
    r.height = 32;
    r.width = 32;
    r.text_tokens = 8;
    const Result got = pipe.run(r, log);
    EXPECT_EQ(got.latents.size(2), (frames - 1) / 4 + 1);
    EXPECT_EQ(max_abs_diff(got.latents, cli_latents("--model " + folder + " --threads 1 --ranks 2 --steps 2 --frames " +
                                                    std::to_string(frames) +
                                                    " --height 32 --width 32 --text-tokens 8")),
              0.0)
        << frames << " frames";
  }
  EXPECT_EQ(models::models_opened() - opened_before, opened_by_open);
}

TEST(PipelineObject, AStagedPipelineOpensItsModelsInEveryRun) {
  const std::string folder = fixture_dir("flux_pipeline_tiny") + "/pipeline";
  const int64_t opened_before = models::models_opened();
  const Pipeline pipe = Pipeline::open(folder_source(folder), LoadPolicy::staged);
  EXPECT_FALSE(pipe.resident());
  EXPECT_EQ(models::models_opened(), opened_before);  // only the family was read
  Request r = on_ranks(1);
  r.steps = 1;
  r.height = 32;
  r.width = 32;
  r.text_tokens = 8;
  r.decode = Decode::yes;
  StageLog log;
  pipe.run(r, log);
  pipe.run(r, log);
  EXPECT_EQ(models::models_opened() - opened_before, 4);  // the transformer and the VAE, twice
}

// Cancelled from the step hook after `cancel_at` steps: every rank stops there, the error names the step,
// the rank threads' memory is gone and the next request on the pipeline is what a fresh one gives.
void expect_cancel_stops_every_rank(int ranks, int cancel_at) {
  const Pipeline pipe = Pipeline::open(preset_source("flux-tiny"), LoadPolicy::resident);
  std::atomic<bool> cancel{false};
  int steps_reported = 0;
  Request r = on_ranks(ranks);
  r.steps = 6;
  r.height = 32;
  r.width = 32;
  r.text_tokens = 8;
  r.cancel = &cancel;
  r.on_step = [&](int step, int, double) {
    steps_reported = step + 1;
    if (step + 1 == cancel_at) cancel = true;
  };
  const int64_t held_before = memory::current_bytes();
  const int64_t weights_before = weight_memory_counter().current();
  StageLog log;
  cpdit::testing::expect_error([&] { pipe.run(r, log); },
                               {"generation cancelled after step " + std::to_string(cancel_at) + " of 6"});
  EXPECT_EQ(steps_reported, cancel_at);
  EXPECT_EQ(memory::current_bytes(), held_before);
  EXPECT_EQ(weight_memory_counter().current(), weights_before);

  cancel = false;
  Request again = r;
  again.steps = 2;
  again.on_step = nullptr;
  const Result after = pipe.run(again, log);
  const Pipeline fresh = Pipeline::open(preset_source("flux-tiny"), LoadPolicy::resident);
  again.cancel = nullptr;
  EXPECT_EQ(max_abs_diff(after.latents, fresh.run(again, log).latents), 0.0);
}

TEST(PipelineObject, ACancelledRequestStopsEveryRankAfterTheSameStep) {
  expect_cancel_stops_every_rank(1, 2);
  expect_cancel_stops_every_rank(2, 3);
}

}  // namespace
}  // namespace cpdit::pipeline
