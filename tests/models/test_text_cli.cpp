// `cpdit forward` on the text-encoder fixtures: the registry finds the class in config.json's
// `architectures` and the command writes transformers' last_hidden_state (and CLIP's pooler_output).
#include "models/text_fixture.hpp"
#include "support/run_cli.hpp"

#include <gtest/gtest.h>

#include <filesystem>

namespace cpdit::models::text {
namespace {

namespace fs = std::filesystem;
using cpdit::testing::run_cli;
using cpdit::testing::TempDir;
using testing::fixture_dir;
using testing::kRelativeTolerance;
using testing::relative_error;

// A transformers folder (config.json + model.safetensors) of the fixture `name`.
std::string model_folder(const TempDir& dir, const std::string& name) {
  fs::create_directories(dir.path() / name);
  fs::copy_file(fixture_dir(name) + "/config.json", dir.path() / name / "config.json");
  fs::copy_file(fixture_dir(name) + "/weights.safetensors", dir.path() / name / "model.safetensors");
  return dir.file(name);
}

// Runs forward and checks every tensor of `expected` (and no other) against the output.
void expect_forward(const std::string& args, const std::string& expected_file) {
  TempDir out_dir("text_forward_out");
  const std::string out = out_dir.file("out.safetensors");
  const auto r = run_cli("forward " + args + " --output " + out);
  ASSERT_EQ(r.code, 0) << args << "\n" << r.err;
  EXPECT_NE(r.out.find("wrote " + out + "\n"), std::string::npos) << r.out;
  const auto got = io::load_safetensors(out);
  const auto want = io::load_safetensors(expected_file);
  EXPECT_EQ(got.size(), want.size()) << args;
  for (const auto& [name, t] : want) {
    ASSERT_TRUE(got.count(name)) << args << ": no " << name;
    EXPECT_LT(relative_error(got.at(name), t), kRelativeTolerance) << args << " " << name;
  }
}

TEST(TextForwardCli, T5WithAndWithoutAttentionMask) {
  TempDir dir("text_forward_t5");
  const std::string model = model_folder(dir, "t5_tiny");
  const std::string expected = fixture_dir("t5_tiny") + "/expected.safetensors";
  expect_forward("--model " + model + " --inputs " + fixture_dir("t5_tiny") + "/inputs.safetensors", expected);
  const std::string ids_only = dir.file("ids.safetensors");
  io::save_safetensors(ids_only, {{"input_ids", io::load_safetensors(fixture_dir("t5_tiny") + "/inputs.safetensors").at("input_ids")}});
  expect_forward("--model " + model + " --inputs " + ids_only, expected);
}

TEST(TextForwardCli, Umt5) {
  TempDir dir("text_forward_umt5");
  expect_forward("--model " + model_folder(dir, "umt5_tiny") + " --inputs " + fixture_dir("umt5_tiny") + "/inputs.safetensors",
                 fixture_dir("umt5_tiny") + "/expected.safetensors");
}

TEST(TextForwardCli, ClipByBothPoolingRules) {
  TempDir dir("text_forward_clip");
  const std::string model = model_folder(dir, "clip_text_tiny");
  const std::string inputs = " --inputs " + fixture_dir("clip_text_tiny") + "/inputs.safetensors";
  expect_forward("--model " + model + inputs, fixture_dir("clip_text_tiny") + "/expected.safetensors");
  expect_forward("--model " + model + " --config " + fixture_dir("clip_text_tiny") + "/config_eos999.json" + inputs,
                 fixture_dir("clip_text_tiny") + "/expected_eos999.safetensors");
}

// Text encoders run whole on one rank: a split is refused in one line, nothing written.
TEST(TextForwardCli, ContextParallelIsRefused) {
  TempDir dir("text_forward_cp");
  const auto r = run_cli("forward --model " + model_folder(dir, "t5_tiny") + " --inputs " + fixture_dir("t5_tiny") +
                         "/inputs.safetensors --ring 2 --output " + dir.file("out.safetensors"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("runs whole on one rank"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_FALSE(fs::exists(dir.file("out.safetensors")));
}

}  // namespace
}  // namespace cpdit::models::text
