// `cpdit generate` as users of other engines expect it: no silent random text for a real model, a
// default output when none is named, --cfg-scale as the family's classifier-free guidance, a flag the
// model cannot use refused, and `cpdit presets` telling the weights a preset run holds.
#include "support/expect_cli_refused.hpp"
#include "support/run_cli.hpp"

#include <cpdit/core/tensor.hpp>
#include <cpdit/io/safetensors.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace cpdit::pipeline {
namespace {

namespace fs = std::filesystem;
using cpdit::testing::run_cli;
using cpdit::testing::TempDir;

const std::string kFluxFolder = std::string(CPDIT_TEST_DATA) + "/fixtures/flux_pipeline_tiny/pipeline";

Tensor latents_of(const std::string& args, TempDir& dir, const std::string& name) {
  const std::string out = dir.file(name + ".safetensors");
  const auto r = run_cli("generate " + args + " --threads 1 --out " + out);
  EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
  return r.code == 0 ? io::load_safetensors(out).at("latents") : Tensor();
}

// A real model (this fixture folder has no text encoders) given no text is refused before it loads,
// unless --random-embeddings asks for random text; a preset (random weights too) takes it unasked.
TEST(GenerateHabits, ARealModelWithoutTextIsRefusedUnlessAskedForRandomEmbeddings) {
  TempDir dir("generate_no_text");
  const std::string out = dir.file("never.safetensors");
  const std::string args = "generate --model " + kFluxFolder + " --steps 1 --height 32 --width 32 --threads 1";
  cpdit::testing::expect_cli_refused(args + " --out " + out,
                                     "no prompt: give --prompt (or --embeddings from encode-prompt); "
                                     "--random-embeddings runs",
                                     out);
  const auto asked = run_cli(args + " --random-embeddings --out " + out);
  EXPECT_EQ(asked.code, 0) << asked.err;
  EXPECT_TRUE(fs::exists(out));
  const auto preset = run_cli("generate --preset flux-tiny --steps 1 --height 32 --width 32 --threads 1 --out " +
                              dir.file("preset.safetensors"));
  EXPECT_EQ(preset.code, 0) << preset.err;
}

// Without an output flag the run writes output.png (a clip: output.mp4) in the current folder and
// says so; a second run does not replace the first picture.
TEST(GenerateHabits, NoOutputFlagWritesOutputPngAndKeepsAnEarlierOne) {
  TempDir dir("generate_default_output");
  const std::string args = "--steps 1 --height 32 --width 32 --threads 1 --prompt 'a fox'";
  auto bytes = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  std::string first;
  for (const char* expected : {"output.png", "output_1.png"}) {
    const auto r = run_cli("generate --preset flux-tiny " + args + (first.empty() ? "" : " --seed 2"), "",
                           dir.path().string());
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find(std::string("wrote        ") + expected), std::string::npos) << r.out;
    ASSERT_TRUE(fs::is_regular_file(dir.file(expected))) << expected;
    if (first.empty()) first = bytes(dir.file("output.png"));
  }
  EXPECT_EQ(bytes(dir.file("output.png")), first);  // the second run (another seed) left it as it was
  EXPECT_NE(bytes(dir.file("output_1.png")), first);
  const auto clip = run_cli("generate --preset wan-tiny --frames 5 " + args);
  ASSERT_EQ(clip.code, 0) << clip.err;
  EXPECT_NE(clip.out.find("wrote        output.mp4"), std::string::npos) << clip.out;
}

// --cfg-scale is the family's classifier-free guidance: FLUX.1's --true-cfg-scale, Wan's --guidance
// (the same run, bit for bit); giving both is refused.
TEST(GenerateHabits, CfgScaleIsTheFamilysClassifierFreeGuidance) {
  TempDir dir("generate_cfg_scale");
  const std::string flux = "--preset flux-tiny --steps 2 --height 32 --width 32 --prompt 'a fox' -n 'blurry'";
  EXPECT_EQ(max_abs_diff(latents_of(flux + " --cfg-scale 2.5", dir, "a"),
                         latents_of(flux + " --true-cfg-scale 2.5", dir, "b")),
            0.0);
  EXPECT_GT(max_abs_diff(latents_of(flux + " --cfg-scale 2.5", dir, "c"), latents_of(flux, dir, "d")), 0.0);
  const std::string wan = "--preset wan-tiny --steps 2 --frames 5 --height 32 --width 32 --prompt 'a fox'";
  EXPECT_EQ(max_abs_diff(latents_of(wan + " --cfg-scale 3", dir, "e"), latents_of(wan + " --guidance 3", dir, "f")),
            0.0);
  const std::string out = dir.file("never.safetensors");
  cpdit::testing::expect_cli_refused("generate " + flux + " --cfg-scale 2 --true-cfg-scale 3 --out " + out,
                                     "--cfg-scale is preset flux-tiny's --true-cfg-scale: give one of them", out);
}

// flux-tiny has no guidance embedding (as FLUX.1-schnell): --guidance would change nothing, so it is
// refused; --frames on an image model too.
TEST(GenerateHabits, FlagsTheModelCannotUseAreRefused) {
  TempDir dir("generate_unused_flags");
  const std::string out = dir.file("never.safetensors");
  const std::string flux = "generate --preset flux-tiny --steps 1 --height 32 --width 32 --threads 1 --out " + out;
  cpdit::testing::expect_cli_refused(flux + " --guidance 3.5",
                                     "--guidance is FLUX.1-dev's guidance embedding, and preset flux-tiny has none",
                                     out);
  cpdit::testing::expect_cli_refused(flux + " --frames 5", "--frames is for video models", out);
}

// `cpdit presets` lists every preset; its parameter count is what a run of it holds (f32 weights of
// the denoise stage, the transformer alone).
TEST(GenerateHabits, PresetsListTheWeightsARunHolds) {
  const auto listed = run_cli("presets --json");
  ASSERT_EQ(listed.code, 0) << listed.err;
  const nlohmann::json presets = nlohmann::json::parse(listed.out);
  ASSERT_EQ(presets.size(), 9u);
  const nlohmann::json* flux_tiny = nullptr;
  for (const nlohmann::json& p : presets)
    if (p["name"] == "flux-tiny") flux_tiny = &p;
  ASSERT_NE(flux_tiny, nullptr);
  EXPECT_EQ((*flux_tiny)["pipeline"], "FluxPipeline");
  TempDir dir("presets_weights");
  const auto run = run_cli("generate --preset flux-tiny --steps 1 --height 32 --width 32 --threads 1 --json --out " +
                           dir.file("a.safetensors"));
  ASSERT_EQ(run.code, 0) << run.err;
  const nlohmann::json summary = nlohmann::json::parse(run.out);
  for (const nlohmann::json& stage : summary["stages"])
    if (stage["name"] == "denoise")
      EXPECT_EQ(stage["weight_bytes"].get<int64_t>(), 4 * (*flux_tiny)["parameters"].get<int64_t>());
  const auto table = run_cli("presets");
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("wan-mini"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("256x256x5f"), std::string::npos) << table.out;
}

}  // namespace
}  // namespace cpdit::pipeline
