// The Wan denoising loop across ranks: equal to one rank under every layout, uneven token counts
// included, and `cpdit generate --preset wan-tiny` writing video latents.
#include "support/run_cli.hpp"

#include <cpdit/comm/local.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/pipeline/presets.hpp>
#include <cpdit/pipeline/wan_pipeline.hpp>

#include <gtest/gtest.h>

#include <mutex>

namespace cpdit::pipeline {
namespace {

Tensor generate_tiny(int ring, int ulysses, int64_t frames, int64_t height, int64_t width) {
  static const models::wan::WanCheckpoint checkpoint = wan_preset("wan-tiny", 3);
  const Tensor embeds = random_wan_prompt_embeds(checkpoint.config, 1, 7, 1);
  WanGenerateOptions options;
  options.steps = 3;
  options.frames = frames;
  options.height = height;
  options.width = width;
  options.seed = 8;
  parallel::ContextParallelConfig config;
  config.ring_degree = ring;
  config.ulysses_degree = ulysses;

  Tensor latents;
  std::mutex mutex;
  comm::LocalOptions local;
  local.threads_per_rank = 1;
  comm::run_local(
      ring * ulysses,
      [&](comm::Communicator& world) {
        std::shared_ptr<comm::Communicator> group = world.split(0, world.rank());
        auto model = models::wan::load_wan(checkpoint);
        if (group->size() > 1) model->enable_parallelism(group, config);
        UniPCMultistepScheduler scheduler(UniPCConfig::wan21());
        WanGenerateResult result = generate_wan(*model, model->config(), scheduler, embeds, options);
        std::lock_guard<std::mutex> lock(mutex);
        if (world.rank() == 0) latents = result.latents;
      },
      local);
  return latents;
}

TEST(WanGenerate, EveryLayoutMatchesOneRank) {
  // 5 frames of 64 x 64: 2 x 4 x 4 = 32 tokens; 9 frames of 48 x 80: 3 x 3 x 5 = 45 tokens.
  struct Clip {
    int64_t frames, height, width;
  };
  for (Clip clip : {Clip{5, 64, 64}, Clip{9, 48, 80}}) {
    Tensor single = generate_tiny(1, 1, clip.frames, clip.height, clip.width);
    EXPECT_EQ(single.size(2), (clip.frames - 1) / 4 + 1);
    for (auto [ring, ulysses] : {std::pair{2, 1}, std::pair{1, 2}, std::pair{2, 2}, std::pair{4, 1}}) {
      Tensor split = generate_tiny(ring, ulysses, clip.frames, clip.height, clip.width);
      EXPECT_LT(max_abs_diff(split, single), 1e-4) << "ring " << ring << " x ulysses " << ulysses;
    }
  }
}

TEST(WanGenerate, RefusesFrameCountsThatAreNot4kPlus1) {
  EXPECT_THROW(wan_latent_shape(wan_preset_config("wan-tiny"), 1, 6, 64, 64), Error);
  EXPECT_THROW(wan_latent_shape(wan_preset_config("wan-tiny"), 1, 5, 72, 64), Error);
  EXPECT_EQ(wan_latent_shape(wan_preset_config("wan-tiny"), 1, 17, 480, 832), (Shape{1, 16, 5, 60, 104}));
  // A VAE config with other factors (spatial 4, temporal 2) changes both the size unit and the frames rule.
  const WanVaeFactors small =
      WanVaeFactors::from_json(nlohmann::json::parse(R"({"scale_factor_spatial": 4, "scale_factor_temporal": 2})"));
  EXPECT_EQ(wan_latent_shape(wan_preset_config("wan-tiny"), 1, 7, 40, 24, small), (Shape{1, 16, 4, 10, 6}));
  EXPECT_THROW(wan_latent_shape(wan_preset_config("wan-tiny"), 1, 6, 40, 24, small), Error);
  EXPECT_THROW(WanVaeFactors::from_json(nlohmann::json::parse(R"({"scale_factor_spatial": 0})")), Error);
}

TEST(WanGenerateCli, WritesVideoLatents) {
  cpdit::testing::TempDir dir("wan_generate_cli");
  auto r = cpdit::testing::run_cli("generate --preset wan-tiny --frames 5 --height 64 --width 64 --steps 2 --ranks 2 "
                                   "--threads 1 --json --out " + dir.file("clip.safetensors"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(io::load_safetensors(dir.file("clip.safetensors")).at("latents").shape(), (Shape{1, 16, 2, 8, 8}));
  auto bad = cpdit::testing::run_cli("generate --preset wan-tiny --frames 6 --out " + dir.file("never.safetensors"));
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_NE(bad.err.find("4k + 1"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace cpdit::pipeline
