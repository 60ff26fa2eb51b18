// `cpdit attention --ring R --ulysses U` on the outside-truth attention fixtures: the gathered out
// and lse match the single-rank run of the same binary and the float64 reference, also under
// causal and block-causal rules; impossible configurations exit 2 with one line.
#include "support/run_cli.hpp"

#include <cpdit/io/safetensors.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

namespace cpdit::parallel {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(CPDIT_TEST_DATA) / "fixtures" / "attention";

using cpdit::testing::CliResult;
using cpdit::testing::TempDir;

CliResult run_attention(const fs::path& input, const std::string& output, const std::string& flags) {
  return cpdit::testing::run_cli("attention --inputs " + input.string() + " --output " + output + " " + flags);
}

TEST(ContextParallelCli, EveryMeshMatchesTheSingleRankRunAndTheReference) {
  const char* fixtures[] = {"attention_b2_s100_h4_d32_keymask.safetensors",
                            "attention_b1_s257_h3_d64.safetensors"};
  const char* meshes[] = {"--ring 2", "--ring 3 --rotate allgather", "--ulysses 2",
                          "--ring 2 --ulysses 2", "--ring 1 --ulysses 3"};
  for (const char* name : fixtures) {
    const fs::path input = kFixtures / name;
    const auto want = io::load_safetensors(input.string());
    TempDir dir("cp_cli");
    const std::string single = dir.file("single.safetensors");
    ASSERT_EQ(run_attention(input, single, "").code, 0);
    const auto one_rank = io::load_safetensors(single);
    for (const char* mesh : meshes) {
      SCOPED_TRACE(std::string(name) + " " + mesh);
      const std::string out = dir.file("cp.safetensors");
      const CliResult r = run_attention(input, out, mesh);
      ASSERT_EQ(r.code, 0) << r.err;
      const auto got = io::load_safetensors(out);
      // f32 over <= 257 keys of O(1) data: a split only reorders the sums (the ring's LSE merge), and
      // PyTorch's float32 run rounds its own way, both far below what a wrong key block moves.
      EXPECT_LE(max_abs_diff(got.at("out"), one_rank.at("out")), 1e-5);
      EXPECT_LE(max_abs_diff(got.at("lse"), one_rank.at("lse")), 1e-5);
      EXPECT_LE(max_abs_diff(got.at("out"), want.at("out")), 2e-5);
      EXPECT_LE(max_abs_diff(got.at("lse"), want.at("lse")), 2e-5);
    }
  }
}

// Causal and SkyReels-V2 block-causal (with key padding) fixtures: PyTorch float64 on dense masks.
TEST(ContextParallelCli, MaskRulesMatchTheFloat64FixturesOnEveryMesh) {
  const fs::path dir = fs::path(CPDIT_TEST_DATA) / "fixtures" / "attention_rules";
  const std::pair<const char*, const char*> fixtures[] = {
      {"attention_rules_b2_s100_h4_d32_causal.safetensors", "--mask causal"},
      {"attention_rules_b2_s96_h4_d32_blockcausal_keymask.safetensors", "--mask block-causal --block-tokens 24"}};
  const char* meshes[] = {"", "--ring 2", "--ring 3 --rotate allgather", "--ulysses 2",
                          "--ring 2 --ulysses 2", "--ring 1 --ulysses 3"};
  for (auto [name, rule] : fixtures) {
    const fs::path input = dir / name;
    const auto want = io::load_safetensors(input.string());
    TempDir dir("cp_cli_rules");
    for (const char* mesh : meshes) {
      SCOPED_TRACE(std::string(name) + " " + mesh);
      const std::string out = dir.file("rule.safetensors");
      const CliResult r = run_attention(input, out, std::string(rule) + " " + mesh);
      ASSERT_EQ(r.code, 0) << r.err;
      const auto got = io::load_safetensors(out);
      // f32 against float64 over <= 100 keys of O(1) data, as the single-rank backends.
      EXPECT_LE(max_abs_diff(got.at("out"), want.at("out_f64")), 2e-5);
      EXPECT_LE(max_abs_diff(got.at("lse"), want.at("lse_f64")), 2e-5);
    }
  }
}

TEST(ContextParallelCli, ImpossibleConfigurationsExitTwoWithOneLine) {
  const fs::path input = kFixtures / "attention_b1_s64_h2_d16.safetensors";
  TempDir dir("cp_cli_refused");
  const std::string out = dir.file("never.safetensors");
  // 2 heads cannot feed 4 Ulysses ranks; 4 ranks cannot be ring 3; a block-causal rule needs its
  // block size, and a block size needs the block-causal rule.
  for (const char* flags : {"--ulysses 4", "--ring 3 --ranks 4", "--mask block-causal",
                            "--mask causal --block-tokens 4"}) {
    SCOPED_TRACE(flags);
    const CliResult r = run_attention(input, out, flags);
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find("cpdit: error:"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out));
  }
}

}  // namespace
}  // namespace cpdit::parallel
