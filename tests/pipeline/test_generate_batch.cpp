// `cpdit generate --prompts FILE`: one request a line on one opened pipeline, each writing its own
// outputs, each exactly what a separate run with that line's settings writes; the summary shows the
// models loaded once.
#include "support/run_cli.hpp"
#include "support/temp_dir.hpp"

#include <cpdit/io/safetensors.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

namespace cpdit {
namespace {

using cpdit::testing::run_cli;
using cpdit::testing::TempDir;

const std::string kFluxAnyHeight = "generate --preset flux-tiny --steps 2 --width 32 --text-tokens 8 --threads 1";
const std::string kFlux = kFluxAnyHeight + " --height 32";

Tensor latents_of(const std::string& path) { return io::load_safetensors(path).at("latents"); }

TEST(GenerateBatch, FourPromptsLoadOnceAndEachIsItsOwnRun) {
  TempDir dir("generate_batch");
  const std::string prompts = dir.file("prompts.txt");
  std::ofstream(prompts) << "a red fox\na blue whale\n\na green frog\na grey owl\n";
  const auto r = run_cli(kFlux + " --prompts " + prompts + " --out " + dir.file("out.safetensors") + " --image " +
                         dir.file("img.png"));
  ASSERT_EQ(r.code, 0) << r.err;
  // The models load once (stage "load"), then each request runs its own encode, denoise and decode.
  std::istringstream err(r.err);
  int loads = 0, denoises = 0;
  std::string load_line;
  for (std::string line; std::getline(err, line);) {
    if (line.rfind("load done in", 0) == 0) ++loads, load_line = line;
    denoises += line.rfind("denoise done in", 0) == 0;
  }
  EXPECT_EQ(loads, 1) << r.err;
  // The load says what it loaded, not only how long it took.
  EXPECT_TRUE(std::regex_search(load_line, std::regex(R"(^load done in [0-9.]+ s, [0-9.]+ (KiB|MiB|GiB) of weights$)")))
      << load_line;
  EXPECT_EQ(denoises, 4) << r.err;
  EXPECT_NE(r.out.find("batch        4 requests on one pipeline, its models loaded once"), std::string::npos) << r.out;
  const char* lines[] = {"a red fox", "a blue whale", "a green frog", "a grey owl"};
  for (int i = 0; i < 4; ++i) {
    const std::string one = dir.file("one_" + std::to_string(i) + ".safetensors");
    const auto single = run_cli(kFlux + " --prompt '" + lines[i] + "' --out " + one);
    ASSERT_EQ(single.code, 0) << single.err;
    EXPECT_EQ(max_abs_diff(latents_of(dir.file("out_" + std::to_string(i) + ".safetensors")), latents_of(one)), 0.0)
        << lines[i];
    EXPECT_TRUE(std::filesystem::is_regular_file(dir.file("img_" + std::to_string(i) + ".png")));
  }
  EXPECT_GT(max_abs_diff(latents_of(dir.file("out_0.safetensors")), latents_of(dir.file("out_1.safetensors"))), 1e-3);
}

TEST(GenerateBatch, JsonLinesSetEachRequestsSeedAndSizeAndIndexNamesTheOutputs) {
  TempDir dir("generate_batch_jsonl");
  const std::string prompts = dir.file("prompts.jsonl");
  std::ofstream(prompts) << R"({"prompt": "a red fox", "seed": 4, "height": 48})" << "\n"
                         << R"({"prompt": "a red fox", "negative_prompt": "blurry", "true_cfg_scale": 2.0})" << "\n";
  const auto r = run_cli(kFlux + " --prompts " + prompts + " --out " + dir.file("run{index}.safetensors"));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string first = dir.file("first.safetensors"), second = dir.file("second.safetensors");
  ASSERT_EQ(run_cli(kFluxAnyHeight + " --prompt 'a red fox' --seed 4 --height 48 --out " + first).code, 0);
  ASSERT_EQ(run_cli(kFlux + " --prompt 'a red fox' --negative-prompt blurry --true-cfg-scale 2 --out " + second).code, 0);
  EXPECT_EQ(max_abs_diff(latents_of(dir.file("run0.safetensors")), latents_of(first)), 0.0);
  EXPECT_EQ(max_abs_diff(latents_of(dir.file("run1.safetensors")), latents_of(second)), 0.0);
}

TEST(GenerateBatch, ABadLineIsRefusedBeforeAnythingRuns) {
  TempDir dir("generate_batch_bad");
  const std::string prompts = dir.file("prompts.jsonl");
  std::ofstream(prompts) << R"({"prompt": "a red fox"})" << "\n" << R"({"prompt": "x", "stpes": 3})" << "\n";
  const auto r = run_cli(kFlux + " --prompts " + prompts + " --out " + dir.file("o.safetensors"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("line 2: unknown field 'stpes'"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("o_0.safetensors")));
  const auto none = run_cli(kFlux + " --prompts " + prompts);
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("--prompts needs an output"), std::string::npos) << none.err;
}

}  // namespace
}  // namespace cpdit
