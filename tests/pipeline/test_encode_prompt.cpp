// `cpdit encode-prompt` against diffusers' own FluxPipeline.encode_prompt and WanPipeline.encode_prompt
// on tiny random text encoders (tests/data/fixtures/encode_prompt, made by
// tools/reference/encode_prompt.py) and the repository's CLIP and T5 tokenizer fixtures.
#include "support/run_cli.hpp"

#include <cpdit/io/json.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/pipeline/prompt_encoding.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace cpdit::pipeline {
namespace {

namespace fs = std::filesystem;
using cpdit::testing::run_cli;
using cpdit::testing::TempDir;

const fs::path kFixtures = fs::path(CPDIT_TEST_DATA) / "fixtures";

// A pipeline folder: model_index.json naming `pipeline`, and each (subfolder, fixture folder) copied.
std::string make_pipeline(const TempDir& dir, const std::string& pipeline,
                          const std::vector<std::pair<std::string, fs::path>>& parts) {
  const fs::path root = dir.path() / pipeline;
  fs::create_directories(root);
  std::ofstream(root / "model_index.json") << R"({"_class_name": ")" << pipeline << R"("})";
  for (const auto& [sub, from] : parts) fs::copy(from, root / sub, fs::copy_options::recursive);
  return root.string();
}

double range_of(const Tensor& t) {
  const float* p = t.data<float>();
  const auto [lo, hi] = std::minmax_element(p, p + t.numel());
  return double(*hi) - double(*lo);
}

// Runs the command and compares every tensor it writes with expected.safetensors' `family/` ones.
void expect_pipeline_embeddings(const std::string& model, const std::string& family, const std::string& extra) {
  const nlohmann::json cases = io::read_json((kFixtures / "encode_prompt/cases.json").string());
  const auto prompt = cases.at("prompt").get<std::string>();
  const auto negative = cases.at("negative_prompt").get<std::string>();
  TempDir out_dir("encode_prompt_out");
  const std::string out = out_dir.file("prompt.safetensors");
  // Single-quoted for the shell: the fixture prompts hold no single quote.
  const auto r = run_cli("encode-prompt --model " + model + " --prompt '" + prompt + "' --negative-prompt '" +
                         negative + "' --max-sequence-length " +
                         std::to_string(cases.at("max_sequence_length").get<int>()) + extra + " --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "wrote " + out + "\n");
  const auto got = io::load_safetensors(out);
  const auto expected = io::load_safetensors((kFixtures / "encode_prompt/expected.safetensors").string());
  size_t compared = 0;
  for (const auto& [key, want] : expected) {
    if (key.rfind(family + "/", 0) != 0) continue;
    const std::string name = key.substr(family.size() + 1);
    ASSERT_TRUE(got.count(name)) << "no " << name;
    ASSERT_EQ(got.at(name).shape(), want.shape()) << name;
    // float32 against float32 on the same weights: rounding only (the fixture README's 1e-5 of the
    // output range separates that from any porting mistake).
    EXPECT_LT(max_abs_diff(got.at(name), want) / range_of(want), 1e-5) << name;
    ++compared;
  }
  EXPECT_EQ(compared, got.size()) << "the command wrote tensors the pipeline does not return";
}

TEST(EncodePrompt, FluxMatchesDiffusersEncodePrompt) {
  TempDir dir("encode_prompt_flux");
  const std::string model = make_pipeline(dir, "FluxPipeline",
                                          {{"tokenizer", kFixtures / "tokenizer_clip_v2"},
                                           {"text_encoder", kFixtures / "encode_prompt/flux_text_encoder"},
                                           {"tokenizer_2", kFixtures / "tokenizer_t5_v2"},
                                           {"text_encoder_2", kFixtures / "encode_prompt/flux_text_encoder_2"}});
  expect_pipeline_embeddings(model, "flux", "");
}

TEST(EncodePrompt, WanMatchesDiffusersEncodePrompt) {
  TempDir dir("encode_prompt_wan");
  const std::string model = make_pipeline(dir, "WanPipeline",
                                          {{"tokenizer", kFixtures / "tokenizer_t5_v2"},
                                           {"text_encoder", kFixtures / "encode_prompt/wan_text_encoder"}});
  expect_pipeline_embeddings(model, "wan", "");
}

TEST(EncodePrompt, UnknownPipelineIsOneLineError) {
  TempDir dir("encode_prompt_unknown");
  const std::string model = make_pipeline(dir, "StableDiffusionPipeline", {});
  const auto r = run_cli("encode-prompt --model " + model + " --prompt cat --out " + dir.file("p.safetensors"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("StableDiffusionPipeline"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_FALSE(fs::exists(dir.file("p.safetensors")));
}

TEST(EncodePrompt, WanCleansWhitespaceAsThePipeline) {
  EXPECT_EQ(collapse_whitespace("  blurry,   low quality\n"), "blurry, low quality");
  EXPECT_EQ(collapse_whitespace("\t\n "), "");
  EXPECT_EQ(collapse_whitespace("a\tb"), "a b");
}

}  // namespace
}  // namespace cpdit::pipeline
