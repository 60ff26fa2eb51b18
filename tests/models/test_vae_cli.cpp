// `cpdit forward` on the VAE fixtures: config.json's _class_name picks the decoder, an input
// `latents` is decoded on one rank or split by rows over several, and bad input is one line, exit 2.
#include "models/vae_fixture.hpp"
#include "support/run_cli.hpp"

#include <gtest/gtest.h>

#include <filesystem>

namespace cpdit::models::vae {
namespace {

namespace fs = std::filesystem;
using testing::fixture_config;
using testing::fixture_dir;
using testing::fixture_file;
using testing::fixture_weights;
using testing::relative_to_range;

std::string model_args(const std::string& fixture) {
  return " --model " + fixture_weights(fixture) + " --config " + fixture_config(fixture);
}

void expect_decodes(const std::string& fixture, std::initializer_list<int> rank_counts) {
  cpdit::testing::TempDir dir("vae_cli");
  const Tensor expected = fixture_file(fixture, "expected").at("sample");
  for (int ranks : rank_counts) {
    const std::string out = dir.file("sample" + std::to_string(ranks) + ".safetensors");
    const auto r = cpdit::testing::run_cli("forward" + model_args(fixture) + " --inputs " + fixture_dir(fixture) +
                                           "/inputs.safetensors --threads 1 --ranks " + std::to_string(ranks) +
                                           " --output " + out);
    ASSERT_EQ(r.code, 0) << r.err;
    // As the in-process tests: within 1e-5 of the range (README of the fixtures).
    EXPECT_LE(relative_to_range(io::load_safetensors(out).at("sample"), expected), 1e-5) << ranks << " ranks";
  }
}

TEST(VaeCli, ForwardDecodesAutoencoderKLLatents) { expect_decodes("vae_kl_tiny", {1, 2, 3, 4}); }  // 4 latent rows
TEST(VaeCli, ForwardDecodesAutoencoderKLWanLatents) { expect_decodes("vae_wan_tiny", {1, 2, 3}); }  // 3 latent rows

TEST(VaeCli, BadInputIsOneLineAndWritesNothing) {
  cpdit::testing::TempDir dir("vae_cli_bad");
  const std::string out = dir.file("sample.safetensors");
  const std::string kl = "forward" + model_args("vae_kl_tiny") + " --output " + out;
  for (const std::string& args :
       {kl + " --inputs " + fixture_dir("vae_wan_tiny") + "/inputs.safetensors",         // 5-D latents
        kl + " --inputs " + fixture_dir("vae_kl_tiny") + "/expected.safetensors",         // no `latents`
        kl + " --inputs " + fixture_dir("vae_kl_tiny") + "/inputs.safetensors --ranks 5"}) {  // 4 rows, 5 ranks
    const auto r = cpdit::testing::run_cli(args);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(out)) << args;
  }
}

}  // namespace
}  // namespace cpdit::models::vae
