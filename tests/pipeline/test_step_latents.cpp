// Request::on_step_latents (diffusers' callback_on_step_end): rank 0 sees the whole latents after each
// step in the loop's layout, gathered when the ranks hold them split (FLUX.1), and latents it returns
// replace every rank's before the next step — so a split run with the callback is the one-rank run with it;
// a callback that throws ends the run with its error and leaves the pipeline usable; Request::finish set
// by it ends the loop after that step (diffusers' pipe._interrupt).
#include "support/expect_error.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/pipeline/pipeline.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <span>
#include <stdexcept>

namespace cpdit::pipeline {
namespace {

// Splits change the attention's summation order only: test_pipeline_parity.cpp's bound for a split run.
constexpr double kSplitTolerance = 1e-4;

struct Seen {
  std::vector<int> steps;
  std::vector<double> timesteps;
  std::vector<Shape> shapes;
};

// `preset` on `ranks` local ranks (ring), 3 steps, the callback recording what it sees and giving back
// `edit(step, latents)` (nullopt: unchanged).
std::pair<Tensor, Seen> run_with(const std::string& preset, int ranks,
                                 const std::function<std::optional<Tensor>(int, const Tensor&)>& edit) {
  PipelineSource source;
  source.preset = preset;
  const Pipeline pipe = Pipeline::open(source, LoadPolicy::resident);
  Request r;
  r.steps = 3;
  r.height = r.width = 32;
  r.text_tokens = 8;
  r.parallel.ranks = ranks;
  r.parallel.ring = ranks;
  r.parallel.threads = 1;
  Seen seen;
  r.on_step_latents = [&](int step, double timestep, const Tensor& latents) {
    seen.steps.push_back(step);
    seen.timesteps.push_back(timestep);
    seen.shapes.push_back(latents.shape());
    return edit(step, latents);
  };
  StageLog log;
  return {pipe.run(r, log).latents, seen};
}

std::optional<Tensor> halve_after_step_1(int step, const Tensor& latents) {
  if (step != 1) return std::nullopt;
  Tensor out = latents.contiguous().clone();
  for (float& x : std::span(out.data<float>(), size_t(out.numel()))) x = 0.5f * x + 0.1f;
  return out;
}

TEST(StepLatents, TheCallbackSeesTheWholeLatentsInTheLoopsLayoutAndItsLatentsReplaceEveryRanks) {
  // The loop's layouts: FLUX.1 packed (B, tokens, 4C), LTX-Video (B, tokens, C), Wan (B, C, F, H, W).
  for (const auto& [preset, rank] : std::vector<std::pair<std::string, size_t>>{
           {"flux-tiny", 3}, {"ltx-tiny", 3}, {"wan-tiny", 5}}) {
    SCOPED_TRACE(preset);
    const auto [plain, unused] = run_with(preset, 1, [](int, const Tensor&) { return std::nullopt; });
    const auto [one, seen] = run_with(preset, 1, halve_after_step_1);
    const auto [two, seen_split] = run_with(preset, 2, halve_after_step_1);
    EXPECT_EQ(seen.steps, (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(seen_split.steps, seen.steps);  // on rank 0 alone
    EXPECT_EQ(seen_split.timesteps, seen.timesteps);
    EXPECT_GT(seen.timesteps[0], seen.timesteps[1]);
    EXPECT_EQ(seen_split.shapes, seen.shapes);  // gathered whole when the ranks hold them split
    EXPECT_EQ(seen.shapes[0].size(), rank);
    EXPECT_EQ(seen.shapes, std::vector<Shape>(3, seen.shapes[0]));
    EXPECT_LT(max_abs_diff(two, one), kSplitTolerance);
    EXPECT_GT(max_abs_diff(one, plain), 0.01);  // the callback's latents were taken
    // Zeros returned after the last step are the result, on one rank and on two.
    for (int ranks : {1, 2}) {
      const auto [zeroed, ignored] =
          run_with(preset, ranks, [](int step, const Tensor& x) -> std::optional<Tensor> {
            return step == 2 ? std::optional(Tensor::zeros(x.shape())) : std::nullopt;
          });
      EXPECT_EQ(max_abs_diff(zeroed, Tensor::zeros(zeroed.shape())), 0.0) << ranks << " ranks";
    }
  }
}

TEST(StepLatents, LatentsOfAnotherShapeAndACallbackThatThrowsEndTheRunAndThePipelineStaysUsable) {
  for (int ranks : {1, 2}) {
    cpdit::testing::expect_error(
        [&] { run_with("flux-tiny", ranks, [](int, const Tensor&) { return std::optional(Tensor::zeros({1, 16})); }); },
        {"the step callback returned latents", "after step 0; the loop's are"});
    EXPECT_THROW(run_with("flux-tiny", ranks, [](int step, const Tensor&) -> std::optional<Tensor> {
                   if (step == 1) throw std::runtime_error("the caller's own");
                   return std::nullopt;
                 }),
                 std::runtime_error);
  }
  EXPECT_EQ(run_with("flux-tiny", 2, halve_after_step_1).second.steps.size(), 3u);
}

TEST(StepLatents, FinishSetByTheCallbackEndsTheLoopWithThatStepsLatents) {
  // Wan's result is in the loop's layout: the latents the callback saw after step 1 are the result.
  PipelineSource source;
  source.preset = "wan-tiny";
  const Pipeline pipe = Pipeline::open(source, LoadPolicy::resident);
  for (int ranks : {1, 2}) {
    std::atomic<bool> finish{false};
    Request r;
    r.steps = 4;
    r.height = r.width = 32;
    r.parallel.ranks = ranks;
    r.parallel.threads = 1;
    r.finish = &finish;
    std::vector<int> steps;
    Tensor at_step_1;
    r.on_step_latents = [&](int step, double, const Tensor& latents) -> std::optional<Tensor> {
      steps.push_back(step);
      if (step == 1) at_step_1 = latents.clone(), finish = true;
      return std::nullopt;
    };
    StageLog log;
    const Result result = pipe.run(r, log);
    EXPECT_EQ(steps, (std::vector<int>{0, 1})) << ranks << " ranks";
    EXPECT_EQ(result.loop.step_seconds.size(), 2u);
    EXPECT_EQ(max_abs_diff(result.latents, at_step_1), 0.0) << ranks << " ranks";
  }
}

TEST(StepLatents, SkyReelsDiffusionForcingRefusesTheCallback) {
  cpdit::testing::expect_error(
      [] { run_with("skyreels-tiny", 1, [](int, const Tensor&) { return std::nullopt; }); },
      {"SkyReels-V2 diffusion forcing steps its latent frames apart"});
}

}  // namespace
}  // namespace cpdit::pipeline
