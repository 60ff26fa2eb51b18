// SkyReels-V2 diffusion forcing against diffusers' SkyReelsV2DiffusionForcingPipeline
// (tests/data/fixtures/skyreels_df_tiny, tools/reference/skyreels_df_pipeline.py): the timestep
// matrix for every case the fixture holds, and a 3-step rollout (blocks of 2 latent frames, ar_step 1,
// one UniPC state per frame, guidance 6) whose final latents are diffusers' on one rank and under
// every split, through the API and through `cpdit generate`.
#include "pipeline/skyreels_case.hpp"
#include "support/read_mp4.hpp"
#include "support/run_cli.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/pipeline/presets.hpp>
#include <cpdit/pipeline/skyreels_pipeline.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace cpdit::pipeline {
namespace {

namespace fs = std::filesystem;
const fs::path kCase = fs::path(CPDIT_TEST_DATA) / "fixtures" / "skyreels_df_tiny";

// diffusers' float32 run and ours differ only in summation order: over the 5 guided model calls the
// observed gap is 7e-6 on latents of magnitude 5.6, on one rank and split; 1e-4 is the bound the Wan
// pipeline parity uses. Stepping a frame at the wrong iteration moves latents by O(1), and a corrector
// that starts from the first step's input instead of its result (diffusers' in-place quirk,
// UniPCMultistepScheduler::step_in_place) by 0.18.
constexpr double kLatentsTolerance = 1e-4;

TEST(SkyReelsTimestepMatrix, EqualsDiffusersForEveryCase) {
  const nlohmann::json cases = io::read_json((kCase / "timestep_matrix.json").string());
  ASSERT_GE(cases.size(), 8u);
  for (const nlohmann::json& c : cases) {
    const std::string what = c.dump().substr(0, 160);
    auto matrix = [&] {
      return generate_timestep_matrix(c["num_latent_frames"], c["step_template"].get<std::vector<int64_t>>(),
                                      c["base_num_latent_frames"], c["ar_step"], c["num_pre_ready"],
                                      c["causal_block_size"]);
    };
    if (c.contains("error")) {
      // diffusers: "`ar_step` should be at least N in your setting"; the same N here.
      const std::string want = c["error"];
      const std::string n = want.substr(want.find("at least ") + 9, want.find(" in your") - want.find("at least ") - 9);
      try {
        matrix();
        ADD_FAILURE() << "no error for " << what;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("at least " + n + " "), std::string::npos) << e.what();
      }
      continue;
    }
    const TimestepMatrix m = matrix();
    EXPECT_EQ(m.timesteps, c["step_matrix"].get<std::vector<std::vector<int64_t>>>()) << what;
    EXPECT_EQ(m.step_index, c["step_index"].get<std::vector<std::vector<int64_t>>>()) << what;
    EXPECT_EQ(m.update, c["update_mask"].get<std::vector<std::vector<bool>>>()) << what;
    std::vector<std::pair<int64_t, int64_t>> window;
    for (const auto& w : c["valid_interval"]) window.emplace_back(w[0], w[1]);
    EXPECT_EQ(m.window, window) << what;
  }
}

TEST(SkyReelsTimestepMatrix, RefusesFramesThatDoNotFillTheBlocks) {
  EXPECT_THROW(generate_timestep_matrix(5, {999, 900}, 5, 1, 0, 2), Error);
  EXPECT_THROW(generate_timestep_matrix(4, {}, 4, 1), Error);
  EXPECT_THROW(generate_timestep_matrix(4, {999, 900}, 4, -1), Error);
}

// Image-to-video models (16 noise + 4 mask + 16 image channels in) sample at flow_shift 5, the others at 8;
// the presets are text-to-video.
TEST(SkyReelsFlowShift, FiveForImageToVideoEightOtherwise) {
  models::wan::WanConfig config = wan_preset_config("skyreels-tiny");
  EXPECT_EQ(skyreels_flow_shift(config), 8.0);
  EXPECT_EQ(skyreels_flow_shift(config, /*image_to_video=*/true), 5.0);  // a diffusion-forcing model from an image
  config.in_channels = 36;
  EXPECT_EQ(skyreels_flow_shift(config), 5.0);
  EXPECT_EQ(video_preset_scheduler("skyreels-mini").flow_shift, 8.0);
  EXPECT_EQ(video_preset_scheduler("wan-mini").flow_shift, 3.0);
}

TEST(SkyReelsGenerate, RolloutEqualsDiffusers) {
  const nlohmann::json c = io::read_json((kCase / "case.json").string());
  const auto ck = models::skyreels_v2::read_skyreels_v2_checkpoint((kCase / "pipeline" / "transformer").string());
  ASSERT_EQ(ck.config.num_frame_per_block, 2);
  auto model = models::skyreels_v2::load_skyreels_v2(ck);
  const auto inputs = io::load_safetensors((kCase / "inputs.safetensors").string());
  SkyReelsGenerateOptions options = testing::case_options(c, inputs);
  options.video.initial_latents = inputs.at("latents");
  const UniPCConfig scheduler =
      UniPCConfig::from_file((kCase / "pipeline" / "scheduler" / "scheduler_config.json").string());
  const WanGenerateResult r = generate_skyreels_v2(*model, ck.config, scheduler, inputs.at("prompt_embeds"), options);
  // 3 blocks starting one iteration apart, 3 steps each: 5 model calls.
  EXPECT_EQ(r.step_seconds.size(), 5u);
  const Tensor expected = io::load_safetensors((kCase / "expected.safetensors").string()).at("latents");
  ASSERT_EQ(r.latents.shape(), expected.shape());
  EXPECT_LT(max_abs_diff(r.latents, expected), kLatentsTolerance);
}

TEST(SkyReelsGenerateCli, FinalLatentsMatchDiffusersOnEverySplit) {
  const Tensor expected = io::load_safetensors((kCase / "expected.safetensors").string()).at("latents");
  const std::string inputs = (kCase / "inputs.safetensors").string();
  const std::string args = "generate --model " + (kCase / "pipeline").string() + " --embeddings " + inputs +
                           " --latents " + inputs + " --steps 3 --frames 21 --height 48 --width 32 --ar-step 1 --json";
  // The transformer has 2 heads: Ulysses up to 2, ring any count; 6 frames of 3 x 2 patches = 36 tokens.
  // The case is guided (negative_prompt_embeds, guidance 6), so --cfg-parallel 2 runs its two passes on two
  // rank groups, alone and with splits inside each group.
  for (const std::string split : {"--ranks 1", "--ring 2", "--ulysses 2", "--ring 3", "--ring 2 --ulysses 2",
                                  "--cfg-parallel 2", "--cfg-parallel 2 --ring 2", "--cfg-parallel 2 --ulysses 2"}) {
    cpdit::testing::TempDir dir("skyreels_generate_cli");
    const std::string out = dir.file("out.safetensors");
    const auto r = cpdit::testing::run_cli(args + " " + split + " --threads 1 --out " + out);
    ASSERT_EQ(r.code, 0) << split << "\n" << r.err;
    EXPECT_LT(max_abs_diff(io::load_safetensors(out).at("latents"), expected), kLatentsTolerance) << split;
  }
}

TEST(SkyReelsGenerateCli, PresetRunsAndBadFrameCountsAreOneLineErrors) {
  cpdit::testing::TempDir dir("skyreels_generate_cli");
  auto r = cpdit::testing::run_cli("generate --preset skyreels-tiny --frames 9 --height 32 --width 32 --steps 2 "
                                   "--ar-step 1 --ranks 2 --threads 1 --json --out " + dir.file("clip.safetensors"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(io::load_safetensors(dir.file("clip.safetensors")).at("latents").shape(), (Shape{1, 16, 3, 4, 4}));
  // The fixture's model takes blocks of 2 latent frames; 17 frames are 5 latent frames.
  auto bad =
      cpdit::testing::run_cli("generate --model " + (kCase / "pipeline").string() +
                              " --frames 17 --height 48 --width 32 --steps 2 --random-embeddings --out " +
                              dir.file("never.safetensors"));
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_NE(bad.err.find("num_frame_per_block"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(dir.file("never.safetensors")));
}

// The staged generate serves SkyReels-V2 as it serves Wan: the preset's UMT5 encodes the prompt and the
// negative prompt (so guidance runs), its Wan VAE decodes the clip into --out's `video` and the frame
// PNGs, and two ranks (ar_step 1: frames at different timesteps) give one rank's latents and pixels.
TEST(SkyReelsGenerateCli, PresetFromPromptDecodesTheSameVideoOnOneAndTwoRanks) {
  cpdit::testing::TempDir dir("skyreels_generate_prompt");
  const std::string common = "generate --preset skyreels-tiny --prompt \"a cat on a wall\" --negative-prompt blur "
                             "--frames 9 --height 32 --width 32 --steps 2 --ar-step 1 --threads 1 --json";
  auto one = cpdit::testing::run_cli(common + " --ranks 1 --out " + dir.file("one.safetensors"));
  ASSERT_EQ(one.code, 0) << one.err;
  auto two = cpdit::testing::run_cli(common + " --ranks 2 --out " + dir.file("two.safetensors") + " --frames-dir " +
                                     dir.file("frames") + "/");
  ASSERT_EQ(two.code, 0) << two.err;
  const nn::TensorMap a = io::load_safetensors(dir.file("one.safetensors"));
  const nn::TensorMap b = io::load_safetensors(dir.file("two.safetensors"));
  EXPECT_EQ(b.at("video").shape(), (Shape{1, 9, 32, 32, 3}));
  // Ranks change only the attention's summation order (float32 rounding); a misplaced frame or a lost
  // timestep moves the latents by O(1), and the pixels with them.
  EXPECT_LT(max_abs_diff(a.at("latents"), b.at("latents")), kLatentsTolerance);
  EXPECT_LT(max_abs_diff(a.at("video"), b.at("video")), kLatentsTolerance);
  for (int f = 0; f < 9; ++f) {
    char name[32];
    std::snprintf(name, sizeof name, "frame_%05d.png", f);
    EXPECT_TRUE(fs::exists(fs::path(dir.file("frames")) / name)) << name;
  }
}

// generate --video plays at the clip's frame rate, read back from the written MP4's stream:
// SkyReels-V2's default fps (24), or --fps (Wan's default 16 is checked by WanPipelineParity).
TEST(SkyReelsGenerateCli, VideoPlaysAtTheClipsFrameRate) {
  cpdit::testing::TempDir dir("skyreels_generate_fps");
  const std::string common = " --frames 5 --height 16 --width 16 --steps 1 --threads 1 --json --video ";
  for (const auto& [flags, fps] : std::vector<std::pair<std::string, double>>{{"--preset skyreels-tiny", 24},
                                                                              {"--preset wan-tiny --fps 30", 30}}) {
    const std::string mp4 = dir.file("clip.mp4");
    auto r = cpdit::testing::run_cli("generate " + flags + common + mp4);
    ASSERT_EQ(r.code, 0) << flags << "\n" << r.err;
    const cpdit::testing::DecodedVideo video = cpdit::testing::read_mp4(mp4);
    EXPECT_EQ(video.fps, fps) << flags;
    EXPECT_EQ(video.rgb.size(), 5u) << flags;
  }
  auto bad = cpdit::testing::run_cli("generate --preset wan-tiny --fps 1001" + common + dir.file("never.mp4"));
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_FALSE(fs::exists(dir.file("never.mp4")));
}

}  // namespace
}  // namespace cpdit::pipeline
