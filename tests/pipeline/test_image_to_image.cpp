// Image-to-image against diffusers' FluxImg2ImgPipeline and QwenImageImg2ImgPipeline
// (tests/data/fixtures/flux_img2img and qwenimage_img2img, tools/reference/img2img_pipelines.py, on
// flux_pipeline_tiny's and qwenimage_pipeline_tiny's pipelines): the image's latents from the PNG with
// diffusers' posterior noise, the start noised to the first step kept, the loop over the steps strength
// keeps on one rank and split, and the command line from the PNG.
#include "support/run_cli.hpp"

#include <cpdit/comm/local.hpp>
#include <cpdit/comm/mesh.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/models/registry.hpp>
#include <cpdit/pipeline/flux_pipeline.hpp>
#include <cpdit/pipeline/image_start.hpp>
#include <cpdit/pipeline/latents.hpp>
#include <cpdit/pipeline/family.hpp>
#include <cpdit/pipeline/qwenimage_pipeline.hpp>
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
const fs::path kFixtures = fs::path(CPDIT_TEST_DATA) / "fixtures";
const fs::path kImage = kFixtures / "flux_img2img" / "image.png";

// A family's fixture (`name`) and the pipeline folder it ran on.
struct Family {
  std::string name;
  fs::path pipeline;
};
const Family kFlux{"flux_img2img", kFixtures / "flux_pipeline_tiny" / "pipeline"};
const Family kQwen{"qwenimage_img2img", kFixtures / "qwenimage_pipeline_tiny" / "pipeline"};

// The VAE encoders' latents (magnitude ~2) differ from diffusers' by summation order only, as the encoder
// fixtures' (vae_kl_tiny_encode, vae_wan_tiny_encode: 1e-5); the start by those through (1 - sigma) < 1
// plus one rounding; the loop's latents as the text-to-image pipelines' bound (test_pipeline_parity.cpp:
// observed 1e-5).
constexpr double kEncodedTolerance = 1e-5;
constexpr double kLatentsTolerance = 1e-4;

nn::TensorMap expected(const Family& f) {
  return io::load_safetensors((kFixtures / f.name / "expected.safetensors").string());
}
nlohmann::json case_json(const Family& f) { return io::read_json((kFixtures / f.name / "case.json").string()); }
nn::TensorMap inputs(const Family& f) {
  return io::load_safetensors((kFixtures / f.name / "inputs.safetensors").string());
}

FlowMatchEulerScheduler scheduler(const Family& f) {
  return FlowMatchEulerScheduler(
      FlowMatchEulerConfig::from_file((f.pipeline / "scheduler" / "scheduler_config.json").string()));
}

// (1, C, h, w): Qwen-Image's image latents and draws carry a frame axis of one.
Tensor four_d(const Tensor& t) { return t.reshape({1, t.numel() / (16 * 16), 16, 16}); }

TEST(ImageToImage, ImageLatentsAreThePipelines) {
  for (const Family& f : {kFlux, kQwen}) {
    const nn::TensorMap want = expected(f);
    const Tensor pixels = image_pixels(kImage.string(), 32, 32);
    EXPECT_EQ(max_abs_diff(pixels, want.at("pixels").reshape(pixels.shape())), 0.0) << f.name;  // bit for bit
    const models::LoadedModel vae = models::open_model((f.pipeline / "vae").string(), std::nullopt, {});
    const Tensor got = image_start_latents(vae, pixels, four_d(want.at("posterior_noise")));
    EXPECT_LT(max_abs_diff(got, four_d(want.at("image_latents"))), kEncodedTolerance) << f.name;
    EXPECT_THROW(image_start_latents(vae, pixels, four_d(want.at("noise")).narrow(2, 0, 8)), Error) << f.name;
  }
}

TEST(ImageToImage, TheStartIsTheSchedulersNoisedImage) {
  for (const Family& f : {kFlux, kQwen}) {
    const nn::TensorMap want = expected(f);
    const nlohmann::json c = case_json(f);
    FlowMatchEulerScheduler s = scheduler(f);
    s.set_timesteps(c["steps"], s.config().mu(64));  // 16 x 16 latents: 8 x 8 tokens
    const int first = skipped_steps(c["steps"], c["strength"]);
    EXPECT_EQ(first, 2);
    EXPECT_NEAR(s.timesteps()[size_t(first)], c["timesteps"][0].get<double>(), 1e-3) << f.name;
    const Tensor got = noised_image_latents(flux_pack(four_d(want.at("image_latents"))),
                                            flux_pack(four_d(want.at("noise"))), s.sigmas()[size_t(first)]);
    EXPECT_LT(max_abs_diff(got, want.at("initial_latents")), 1e-6) << f.name;
  }
}

TEST(ImageToImage, StrengthsThatLeaveNoStepAreRefused) {
  EXPECT_EQ(skipped_steps(5, 1.0), 0);
  EXPECT_EQ(skipped_steps(28, 0.6), 11);  // int(28 - 16.8)
  EXPECT_EQ(skipped_steps(5, 0.1), 4);    // int(5 - 0.5): one step left
  EXPECT_THROW(skipped_steps(5, 0.0), Error);
  EXPECT_THROW(skipped_steps(5, 1.5), Error);
}

// The FLUX.1 loop from `options` (image and initial latents set by the caller) on `ranks` ring ranks.
Tensor generate_flux_on(FluxGenerateOptions options, int ranks) {
  const models::LoadedModel transformer =
      models::open_model((kFlux.pipeline / "transformer").string(), std::nullopt, {});
  const auto& config = config_of<models::flux::FluxConfig>(transformer);
  const nn::TensorMap in = inputs(kFlux);
  const FluxConditioning conditioning{in.at("prompt_embeds"), in.at("pooled_prompt_embeds"), {}, {}};
  const nlohmann::json c = case_json(kFlux);
  options.steps = c["steps"];
  options.height = c["height"];
  options.width = c["width"];
  options.guidance = c["guidance_scale"];
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
        FlowMatchEulerScheduler s = scheduler(kFlux);
        const FluxGenerateResult r = generate_flux(*model, config, s, conditioning, options, group.get());
        std::lock_guard lock(mutex);
        if (world.rank() == 0) latents = r.latents;
      },
      one_thread_each);
  return latents;
}

// The Qwen-Image loop (true CFG 4.0 on the fixture's negative pair) from `options` on one rank.
Tensor generate_qwen(QwenImageGenerateOptions options) {
  const models::LoadedModel transformer =
      models::open_model((kQwen.pipeline / "transformer").string(), std::nullopt, {});
  const auto& config = config_of<models::qwenimage::QwenImageConfig>(transformer);
  const nlohmann::json c = case_json(kQwen);
  options.steps = c["steps"];
  options.height = c["height"];
  options.width = c["width"];
  options.true_cfg_scale = c["true_cfg_scale"];
  options.vae_scale_factor = 2;
  FlowMatchEulerScheduler s = scheduler(kQwen);
  return generate_qwenimage(*transformer.replica(), config, s, qwenimage_conditioning(inputs(kQwen), "inputs", config),
                            options)
      .latents;
}

TEST(ImageToImage, LoopOverTheKeptStepsEqualsDiffusers) {
  const nn::TensorMap flux = expected(kFlux), qwen = expected(kQwen);
  FluxGenerateOptions f;
  f.image = {flux.at("image_latents"), case_json(kFlux)["strength"].get<double>()};
  f.initial_latents = flux.at("initial_latents");  // as given latents: the loop's start as they are
  for (int ranks : {1, 2, 3})
    EXPECT_LT(max_abs_diff(generate_flux_on(f, ranks), flux.at("latents")), kLatentsTolerance) << ranks << " ranks";
  // The progress counts the steps run: 3 of 3, not steps 2 to 4 of 5.
  std::vector<std::pair<int, int>> steps_seen;
  f.on_step = [&](int i, int n, double, const StepLatents&) {
    steps_seen.emplace_back(i, n);
    return true;
  };
  generate_flux_on(f, 1);
  EXPECT_EQ(steps_seen, (std::vector<std::pair<int, int>>{{0, 3}, {1, 3}, {2, 3}}));

  QwenImageGenerateOptions q;
  q.image = {four_d(qwen.at("image_latents")), case_json(kQwen)["strength"].get<double>()};
  q.initial_latents = qwen.at("initial_latents");
  EXPECT_LT(max_abs_diff(generate_qwen(q), qwen.at("latents")), kLatentsTolerance);
}

TEST(ImageToImage, SeededStartIsTheSameSplitAndMovesWithTheImage) {
  // No given latents: each rank noises its own shard of the image's latents with its shard of the noise.
  const nn::TensorMap want = expected(kFlux);
  FluxGenerateOptions options;
  options.seed = 5;
  options.image = {want.at("image_latents"), 0.6};
  const Tensor one = generate_flux_on(options, 1);
  EXPECT_LT(max_abs_diff(generate_flux_on(options, 2), one), 1e-5);
  EXPECT_LT(max_abs_diff(generate_flux_on(options, 3), one), 1e-5);
  options.image.image_latents = Tensor::zeros(want.at("image_latents").shape());
  EXPECT_GT(max_abs_diff(generate_flux_on(options, 1), one), 0.1);
  options.image.image_latents = want.at("image_latents").narrow(3, 0, 8);
  EXPECT_THROW(generate_flux_on(options, 1), Error);
}

// `cpdit generate --init-image` on a family's pipeline: the PNG encoded by the command itself.
std::string cli_args(const Family& f, const std::string& flags) {
  const std::string in = (kFixtures / f.name / "inputs.safetensors").string();
  const std::string guidance = f.name == kFlux.name ? "--guidance 3.5" : "--true-cfg-scale 4";
  return "generate --model " + f.pipeline.string() + " --embeddings " + in + " --init-image " + kImage.string() +
         " --height 32 --width 32 --steps 5 --threads 1 " + guidance + " " + flags;
}

Tensor cli_latents(const std::string& args) {
  cpdit::testing::TempDir dir("img2img_cli");
  const std::string out = dir.file("out.safetensors");
  const auto r = cpdit::testing::run_cli(args + " --out " + out);
  EXPECT_EQ(r.code, 0) << r.err;
  return r.code == 0 ? io::load_safetensors(out).at("latents") : Tensor();
}

TEST(ImageToImageCli, FromThePngOnEveryLayout) {
  // diffusers' start given: its final latents, FLUX.1 split over 2 ring ranks, Qwen-Image's two guidance
  // passes on two CFG groups.
  for (const auto& [family, layout] : {std::pair{kFlux, "--ring 2"}, std::pair{kQwen, "--cfg-parallel 2"}}) {
    const std::string given = " --latents " + (kFixtures / family.name / "latents.safetensors").string();
    const Tensor got = cli_latents(cli_args(family, std::string("--strength 0.6 ") + layout + given));
    EXPECT_LT(max_abs_diff(got, expected(family).at("latents")), kLatentsTolerance) << family.name;
  }
  // Seeded: the same on 1 and 2 ranks; at strength 1 the start is the noise alone, text-to-image's bit
  // for bit; at 0.6 the image shows.
  const Tensor one = cli_latents(cli_args(kFlux, "--seed 4 --ranks 1"));
  EXPECT_LT(max_abs_diff(cli_latents(cli_args(kFlux, "--seed 4 --ulysses 2")), one), 1e-4);
  const std::string text_only = "generate --model " + kFlux.pipeline.string() + " --embeddings " +
                                (kFixtures / kFlux.name / "inputs.safetensors").string() +
                                " --height 32 --width 32 --steps 5 --guidance 3.5 --threads 1 --seed 4 --ranks 1";
  EXPECT_EQ(max_abs_diff(cli_latents(cli_args(kFlux, "--seed 4 --ranks 1 --strength 1")), cli_latents(text_only)),
            0.0);
  EXPECT_GT(max_abs_diff(one, cli_latents(text_only)), 0.1);
  // Without --guidance, FluxImg2ImgPipeline's default 7.0 (FluxPipeline's is 3.5).
  std::string defaulted = cli_args(kFlux, "--seed 4 --ranks 1");
  defaulted.replace(defaulted.find("--guidance 3.5"), 14, "");
  std::string seven = cli_args(kFlux, "--seed 4 --ranks 1");
  seven.replace(seven.find("--guidance 3.5"), 14, "--guidance 7");
  EXPECT_EQ(max_abs_diff(cli_latents(defaulted), cli_latents(seven)), 0.0);
  EXPECT_GT(max_abs_diff(cli_latents(defaulted), one), 1e-3);
}

TEST(ImageToImageCli, RefusesWhatItCannotUse) {
  auto refused = [](const std::string& args, const std::string& message) {
    cpdit::testing::TempDir dir("img2img_refused");
    const auto r = cpdit::testing::run_cli(args + " --out " + dir.file("never.safetensors"));
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << "\n" << r.err;
    EXPECT_FALSE(fs::exists(dir.file("never.safetensors")));
  };
  refused(cli_args(kFlux, "--strength 0"), "leaves no step to run");
  refused(cli_args(kQwen, "--strength 1.5"), "strength must be in [0, 1]");
  const std::string wan = (kFixtures / "wan_pipeline_tiny" / "pipeline").string();
  refused("generate --model " + wan + " --frames 5 --height 48 --width 32 --steps 1 --random-embeddings --init-image " +
              kImage.string(),
          "--init-image is for FLUX.1 and Qwen-Image image-to-image");
  refused("generate --model " + kFlux.pipeline.string() + " --height 32 --width 32 --steps 1 --strength 0.5",
          "--strength goes with --init-image");
}

}  // namespace
}  // namespace cpdit::pipeline
