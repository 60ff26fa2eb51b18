// FLUX.1 image-to-image against diffusers' FluxImg2ImgPipeline (tests/data/fixtures/flux_img2img,
// tools/reference/flux_img2img_pipeline.py, on flux_pipeline_tiny's pipeline): the image's latents from
// the PNG with diffusers' posterior noise, the start noised to the first step kept, the loop over the
// steps strength keeps on one rank and split, and the command line from the PNG.
#include "support/run_cli.hpp"

#include <cpdit/comm/local.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/models/registry.hpp>
#include <cpdit/pipeline/flux_image.hpp>
#include <cpdit/pipeline/flux_pipeline.hpp>
#include <cpdit/pipeline/latents.hpp>
#include <cpdit/pipeline/pipeline_table.hpp>
#include <cpdit/pipeline/skyreels_image.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace cpdit::pipeline {
namespace {

namespace fs = std::filesystem;
const fs::path kFixture = fs::path(CPDIT_TEST_DATA) / "fixtures" / "flux_img2img";
const fs::path kPipeline = fs::path(CPDIT_TEST_DATA) / "fixtures" / "flux_pipeline_tiny" / "pipeline";

// The VAE encoder's latents (magnitude ~2) differ from diffusers' by summation order only, as the KL
// encoder fixture's (vae_kl_tiny_encode: 1e-5); the start by those through (1 - sigma) < 1 plus one
// rounding; the loop's latents as the FLUX.1 pipeline's bound (test_pipeline_parity.cpp: observed 1e-5).
constexpr double kEncodedTolerance = 1e-5;
constexpr double kLatentsTolerance = 1e-4;

nn::TensorMap expected() { return io::load_safetensors((kFixture / "expected.safetensors").string()); }
nlohmann::json case_json() { return io::read_json((kFixture / "case.json").string()); }

FlowMatchEulerScheduler scheduler() {
  return FlowMatchEulerScheduler(
      FlowMatchEulerConfig::from_file((kPipeline / "scheduler" / "scheduler_config.json").string()));
}

TEST(FluxImageToImage, ImageLatentsAreThePipelines) {
  const nn::TensorMap want = expected();
  const Tensor pixels = image_pixels((kFixture / "image.png").string(), 32, 32);
  EXPECT_EQ(max_abs_diff(pixels, want.at("pixels")), 0.0);  // PIL's Lanczos and the [-1, 1] scaling, bit for bit
  const models::LoadedModel vae = models::open_model((kPipeline / "vae").string(), std::nullopt, {});
  const Tensor got = flux_image_latents(vae, pixels, want.at("posterior_noise"));
  ASSERT_EQ(got.shape(), want.at("image_latents").shape());
  EXPECT_LT(max_abs_diff(got, want.at("image_latents")), kEncodedTolerance);
  EXPECT_THROW(flux_image_latents(vae, pixels, want.at("noise").narrow(2, 0, 8)), Error);  // noise of another shape
}

TEST(FluxImageToImage, TheStartIsTheSchedulersNoisedImage) {
  const nn::TensorMap want = expected();
  const nlohmann::json c = case_json();
  FlowMatchEulerScheduler s = scheduler();
  s.set_timesteps(c["steps"], s.config().mu(64));  // 16 x 16 latents: 8 x 8 tokens
  const int first = flux_skipped_steps(c["steps"], c["strength"]);
  EXPECT_EQ(first, 2);
  EXPECT_NEAR(s.timesteps()[size_t(first)], c["timesteps"][0].get<double>(), 1e-3);
  const Tensor got = noised_image_latents(flux_pack(want.at("image_latents")), flux_pack(want.at("noise")),
                                          s.sigmas()[size_t(first)]);
  EXPECT_LT(max_abs_diff(got, want.at("initial_latents")), 1e-6);
}

TEST(FluxImageToImage, StrengthsThatLeaveNoStepAreRefused) {
  EXPECT_EQ(flux_skipped_steps(5, 1.0), 0);
  EXPECT_EQ(flux_skipped_steps(28, 0.6), 11);  // int(28 - 16.8)
  EXPECT_EQ(flux_skipped_steps(5, 0.1), 4);  // int(5 - 0.5): one step left
  EXPECT_THROW(flux_skipped_steps(5, 0.0), Error);
  EXPECT_THROW(flux_skipped_steps(5, 1.5), Error);
}

// The loop from `options` (image and initial latents set by the caller) on `ranks` ring ranks.
Tensor generate(FluxGenerateOptions options, int ranks) {
  const models::LoadedModel transformer = models::open_model((kPipeline / "transformer").string(), std::nullopt, {});
  const auto& config = config_of<models::flux::FluxConfig>(transformer);
  const nn::TensorMap inputs = io::load_safetensors((kFixture / "inputs.safetensors").string());
  const FluxConditioning conditioning{inputs.at("prompt_embeds"), inputs.at("pooled_prompt_embeds"), {}, {}};
  const nlohmann::json c = case_json();
  options.steps = c["steps"];
  options.height = c["height"];
  options.width = c["width"];
  options.guidance = c["guidance"];
  options.vae_scale_factor = 2;
  Tensor latents;
  std::mutex mutex;
  comm::LocalOptions one_thread_each;
  one_thread_each.threads_per_rank = 1;
  comm::run_local(
      ranks,
      [&](comm::Communicator& world) {
        std::shared_ptr<comm::Communicator> group = world.split(0, world.rank());
        std::unique_ptr<nn::Model> model = transformer.replica();
        if (ranks > 1) model->enable_parallelism(group, {ranks, 1}, flux_sharded_latents_plan());
        FlowMatchEulerScheduler s = scheduler();
        const FluxGenerateResult r = generate_flux(*model, config, s, conditioning, options, group.get());
        std::lock_guard lock(mutex);
        if (world.rank() == 0) latents = r.latents;
      },
      one_thread_each);
  return latents;
}

TEST(FluxImageToImage, LoopOverTheKeptStepsEqualsDiffusersOnOneRankAndSplit) {
  const nn::TensorMap want = expected();
  FluxGenerateOptions options;
  options.image = {want.at("image_latents"), case_json()["strength"].get<double>()};
  options.initial_latents = want.at("initial_latents");  // as given latents: the loop's start as they are
  for (int ranks : {1, 2, 3})
    EXPECT_LT(max_abs_diff(generate(options, ranks), want.at("latents")), kLatentsTolerance) << ranks << " ranks";
  // The progress counts the steps run: 3 of 3, not steps 2 to 4 of 5.
  std::vector<std::pair<int, int>> steps_seen;
  options.on_step = [&](int i, int n, double) { steps_seen.emplace_back(i, n); };
  generate(options, 1);
  EXPECT_EQ(steps_seen, (std::vector<std::pair<int, int>>{{0, 3}, {1, 3}, {2, 3}}));
}

TEST(FluxImageToImage, SeededStartIsTheSameSplitAndMovesWithTheImage) {
  // No given latents: each rank noises its own shard of the image's latents with its shard of the noise.
  const nn::TensorMap want = expected();
  FluxGenerateOptions options;
  options.seed = 5;
  options.image = {want.at("image_latents"), 0.6};
  const Tensor one = generate(options, 1);
  EXPECT_LT(max_abs_diff(generate(options, 2), one), 1e-5);
  EXPECT_LT(max_abs_diff(generate(options, 3), one), 1e-5);
  options.image.image_latents = Tensor::zeros(want.at("image_latents").shape());
  EXPECT_GT(max_abs_diff(generate(options, 1), one), 0.1);
  options.image.image_latents = want.at("image_latents").narrow(3, 0, 8);
  EXPECT_THROW(generate(options, 1), Error);
}

// `cpdit generate --init-image`: the PNG encoded by the command itself.
std::string cli_args(const std::string& flags) {
  const std::string inputs = (kFixture / "inputs.safetensors").string();
  return "generate --model " + kPipeline.string() + " --embeddings " + inputs + " --init-image " +
         (kFixture / "image.png").string() + " --height 32 --width 32 --steps 5 --guidance 3.5 --threads 1 " + flags;
}

Tensor cli_latents(const std::string& args) {
  cpdit::testing::TempDir dir("flux_img2img_cli");
  const std::string out = dir.file("out.safetensors");
  const auto r = cpdit::testing::run_cli(args + " --out " + out);
  EXPECT_EQ(r.code, 0) << r.err;
  return r.code == 0 ? io::load_safetensors(out).at("latents") : Tensor();
}

TEST(FluxImageToImageCli, FromThePngOnEveryLayout) {
  // diffusers' start given: its final latents, split over 2 ring ranks.
  const Tensor want = expected().at("latents");
  const std::string given = " --latents " + (kFixture / "latents.safetensors").string();
  EXPECT_LT(max_abs_diff(cli_latents(cli_args("--strength 0.6 --ring 2" + given)), want), kLatentsTolerance);
  // Seeded: the same on 1 and 2 ranks; at strength 1 the start is the noise alone, text-to-image's bit
  // for bit; at 0.6 the image shows.
  const Tensor one = cli_latents(cli_args("--seed 4 --ranks 1"));
  EXPECT_LT(max_abs_diff(cli_latents(cli_args("--seed 4 --ulysses 2")), one), 1e-4);
  const std::string text_only = "generate --model " + kPipeline.string() + " --embeddings " +
                                (kFixture / "inputs.safetensors").string() +
                                " --height 32 --width 32 --steps 5 --guidance 3.5 --threads 1 --seed 4 --ranks 1";
  EXPECT_EQ(max_abs_diff(cli_latents(cli_args("--seed 4 --ranks 1 --strength 1")), cli_latents(text_only)), 0.0);
  EXPECT_GT(max_abs_diff(one, cli_latents(text_only)), 0.1);
}

TEST(FluxImageToImageCli, RefusesWhatItCannotUse) {
  auto refused = [](const std::string& args, const std::string& message) {
    cpdit::testing::TempDir dir("flux_img2img_refused");
    const auto r = cpdit::testing::run_cli(args + " --out " + dir.file("never.safetensors"));
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << "\n" << r.err;
    EXPECT_FALSE(fs::exists(dir.file("never.safetensors")));
  };
  refused(cli_args("--strength 0"), "leaves no step to run");
  refused(cli_args("--strength 1.5"), "strength must be in [0, 1]");
  const std::string wan = std::string(CPDIT_TEST_DATA) + "/fixtures/wan_pipeline_tiny/pipeline";
  refused("generate --model " + wan + " --frames 5 --height 48 --width 32 --steps 1 --init-image " +
              (kFixture / "image.png").string(),
          "--init-image is for FLUX.1 image-to-image");
  refused("generate --model " + kPipeline.string() + " --height 32 --width 32 --steps 1 --strength 0.5",
          "--strength goes with --init-image");
}

}  // namespace
}  // namespace cpdit::pipeline
