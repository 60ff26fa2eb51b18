// Wan 2.2 A14B's two experts against diffusers' WanPipeline and WanImageToVideoPipeline with a
// transformer_2 and a boundary_ratio (tests/data/fixtures/wan22_experts,
// tools/reference/wan22_experts_pipeline.py): 4 steps at timesteps 999, 900 (the boundary itself, which
// the high-noise expert takes), 750 and 500, the last two on the low-noise expert at guidance_scale_2;
// text to video and, as Wan 2.2 I2V A14B, from diffusers' image condition without image tokens.
#include "pipeline/wan_case.hpp"
#include "support/run_cli.hpp"

#include <cpdit/io/json.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/pipeline/skyreels_image.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace cpdit::pipeline {
namespace {

namespace fs = std::filesystem;
const fs::path kFixture = fs::path(CPDIT_TEST_DATA) / "fixtures" / "wan22_experts";

// As the other video pipelines' bound (test_wan_image_to_video.cpp): summation order only; one expert
// run for all steps, or the low-noise expert's own scale left out, moves them by 0.06 or more
// (EveryStepNeedsItsExpert).
constexpr double kLatentsTolerance = 1e-4;

struct Case {
  nlohmann::json json;
  WanGenerateOptions options;
  Tensor prompt_embeds, want;
};

Case read_case(const std::string& name) {
  const nn::TensorMap inputs = io::load_safetensors((kFixture / "inputs.safetensors").string());
  Case c{io::read_json((kFixture / name / "case.json").string()), {}, inputs.at("prompt_embeds"),
         io::load_safetensors((kFixture / name / "expected.safetensors").string()).at("latents")};
  WanGenerateOptions& o = c.options;
  o.steps = c.json["steps"];
  o.frames = c.json["frames"];
  o.height = c.json["height"];
  o.width = c.json["width"];
  o.guidance_scale = c.json["guidance"];
  o.low_noise.guidance_scale = c.json["guidance_2"];
  o.negative_prompt_embeds = inputs.at("negative_prompt_embeds");
  o.initial_latents = inputs.at("latents");
  return c;
}

double boundary_timestep(const Case& c) { return c.json["boundary_ratio"].get<double>() * 1000; }

Tensor generate(const std::string& name, const Case& c, int ring, int ulysses, double boundary) {
  return testing::generate_on_ranks(kFixture / name / "pipeline", c.prompt_embeds, c.options, ring, ulysses, boundary);
}

// Wan 2.2 I2V A14B conditions on the image's VAE latents alone (image_dim null): made here from the
// PNG as WanImageToVideoPipeline makes them.
WanImageConditioning image_condition(const Case& c) {
  const models::LoadedModel vae =
      models::open_model((kFixture / "i2v" / "pipeline" / "vae").string(), std::nullopt, {});
  const fs::path png = fs::path(CPDIT_TEST_DATA) / "fixtures" / "wan_i2v_pipeline" / "first.png";
  const Tensor first = image_pixels(png.string(), c.json["height"], c.json["width"]);
  return {wan_image_condition(vae, first, Tensor(), c.json["frames"], 4), Tensor()};
}

TEST(WanExperts, TextToVideoEqualsDiffusersOnEveryLayout) {
  const Case c = read_case("t2v");
  for (auto [ring, ulysses] : {std::pair{1, 1}, std::pair{2, 1}, std::pair{1, 2}}) {
    const Tensor got = generate("t2v", c, ring, ulysses, boundary_timestep(c));
    ASSERT_EQ(got.shape(), c.want.shape());
    EXPECT_LT(max_abs_diff(got, c.want), kLatentsTolerance) << "ring " << ring << " x ulysses " << ulysses;
  }
}

TEST(WanExperts, ImageToVideoWithoutImageTokensEqualsDiffusers) {
  Case c = read_case("i2v");
  c.options.image = image_condition(c);
  for (auto [ring, ulysses] : {std::pair{1, 1}, std::pair{2, 1}}) {
    const Tensor got = generate("i2v", c, ring, ulysses, boundary_timestep(c));
    EXPECT_LT(max_abs_diff(got, c.want), kLatentsTolerance) << "ring " << ring << " x ulysses " << ulysses;
  }
}

TEST(WanExperts, EveryStepNeedsItsExpert) {
  Case c = read_case("t2v");
  EXPECT_GT(max_abs_diff(generate("t2v", c, 1, 1, 0), c.want), 0.1);  // the high-noise expert alone
  c.options.low_noise.guidance_scale = c.options.guidance_scale;  // guidance_scale_2 left out
  EXPECT_GT(max_abs_diff(generate("t2v", c, 1, 1, boundary_timestep(c)), c.want), 0.03);
}

// `cpdit generate` on the fixture's pipeline folders: both experts opened from transformer/ and
// transformer_2/, the boundary from model_index.json, --guidance-2 as guidance_scale_2.
TEST(WanExpertsCli, GenerateEqualsDiffusersSplit) {
  const std::string inputs = (kFixture / "inputs.safetensors").string();
  const std::string image = (fs::path(CPDIT_TEST_DATA) / "fixtures" / "wan_i2v_pipeline" / "first.png").string();
  using Run = std::pair<std::string, std::string>;  // case, its own flags
  // t2v with its two guidance passes on two CFG groups, the low-noise expert's included.
  for (const auto& [name, flags] :
       {Run{"t2v", "--cfg-parallel 2 --ring 2"}, Run{"i2v", "--ulysses 2 --first-image " + image}}) {
    cpdit::testing::TempDir dir("generate_wan_experts");
    const std::string out = dir.file("clip.safetensors");
    const auto r = cpdit::testing::run_cli("generate --model " + (kFixture / name / "pipeline").string() +
                                           " --embeddings " + inputs + " --latents " + inputs +
                                           " --frames 9 --height 48 --width 32 --steps 4 --guidance 4 --guidance-2 3 "
                                           "--threads 1 " + flags + " --out " + out);
    ASSERT_EQ(r.code, 0) << r.err;
    const Tensor want = read_case(name).want;
    EXPECT_LT(max_abs_diff(io::load_safetensors(out).at("latents"), want), kLatentsTolerance) << name;
  }
  // --guidance-2 on a folder of one transformer: one line, exit 2.
  const std::string one = std::string(CPDIT_TEST_DATA) + "/fixtures/wan_pipeline_tiny/pipeline";
  cpdit::testing::TempDir dir("generate_wan_experts_refused");
  const std::string never = dir.file("never.safetensors");
  const auto r = cpdit::testing::run_cli("generate --model " + one + " --frames 5 --height 48 --width 32 --steps 1 "
                                         "--guidance-2 3 --random-embeddings --out " + never);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--guidance-2 is for Wan 2.2's low-noise expert"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(never));
}

}  // namespace
}  // namespace cpdit::pipeline
