// `cpdit attention --ring R --ulysses U` on the outside-truth attention fixtures: the gathered out
// and lse match the single-rank run of the same binary and the float64 reference, also under
// causal and block-causal rules; impossible configurations exit 2 with one line.
#include <cpdit/io/safetensors.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace cpdit::parallel {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(CPDIT_TEST_DATA) / "fixtures" / "attention";

struct CliRun {
  int exit_code;
  std::string stderr_text;
};

fs::path temp_file(const std::string& name) {
  return fs::temp_directory_path() / ("cpdit_cp_cli_" + std::to_string(getpid()) + "_" + name);
}

CliRun run_attention(const fs::path& input, const fs::path& output, const std::string& flags) {
  const fs::path err = temp_file("stderr");
  const std::string cmd = std::string(CPDIT_BINARY) + " attention --inputs " + input.string() +
                          " --output " + output.string() + " " + flags + " 2> " + err.string();
  const int status = std::system(cmd.c_str());
  std::ifstream in(err);
  std::stringstream text;
  text << in.rdbuf();
  fs::remove(err);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, text.str()};
}

TEST(ContextParallelCli, EveryMeshMatchesTheSingleRankRunAndTheReference) {
  const char* fixtures[] = {"attention_b2_s100_h4_d32_keymask.safetensors",
                            "attention_b1_s257_h3_d64.safetensors"};
  const char* meshes[] = {"--ring 2", "--ring 3 --rotate allgather", "--ulysses 2",
                          "--ring 2 --ulysses 2", "--ring 1 --ulysses 3"};
  for (const char* name : fixtures) {
    const fs::path input = kFixtures / name;
    const auto want = io::load_safetensors(input.string());
    const fs::path single = temp_file("single.safetensors");
    ASSERT_EQ(run_attention(input, single, "").exit_code, 0);
    const auto one_rank = io::load_safetensors(single.string());
    for (const char* mesh : meshes) {
      SCOPED_TRACE(std::string(name) + " " + mesh);
      const fs::path out = temp_file("cp.safetensors");
      const CliRun r = run_attention(input, out, mesh);
      ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
      const auto got = io::load_safetensors(out.string());
      EXPECT_LE(max_abs_diff(got.at("out"), one_rank.at("out")), 1e-5);
      EXPECT_LE(max_abs_diff(got.at("lse"), one_rank.at("lse")), 1e-5);
      EXPECT_LE(max_abs_diff(got.at("out"), want.at("out")), 2e-5);
      EXPECT_LE(max_abs_diff(got.at("lse"), want.at("lse")), 2e-5);
      fs::remove(out);
    }
    fs::remove(single);
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
    for (const char* mesh : meshes) {
      SCOPED_TRACE(std::string(name) + " " + mesh);
      const fs::path out = temp_file("rule.safetensors");
      const CliRun r = run_attention(input, out, std::string(rule) + " " + mesh);
      ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
      const auto got = io::load_safetensors(out.string());
      // f32 against float64 over <= 100 keys of O(1) data, as the single-rank backends.
      EXPECT_LE(max_abs_diff(got.at("out"), want.at("out_f64")), 2e-5);
      EXPECT_LE(max_abs_diff(got.at("lse"), want.at("lse_f64")), 2e-5);
      fs::remove(out);
    }
  }
}

TEST(ContextParallelCli, ImpossibleConfigurationsExitTwoWithOneLine) {
  const fs::path input = kFixtures / "attention_b1_s64_h2_d16.safetensors";
  const fs::path out = temp_file("never.safetensors");
  // 2 heads cannot feed 4 Ulysses ranks; 4 ranks cannot be ring 3; a block-causal rule needs its
  // block size, and a block size needs the block-causal rule.
  for (const char* flags : {"--ulysses 4", "--ring 3 --ranks 4", "--mask block-causal",
                            "--mask causal --block-tokens 4"}) {
    SCOPED_TRACE(flags);
    const CliRun r = run_attention(input, out, flags);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(std::count(r.stderr_text.begin(), r.stderr_text.end(), '\n'), 1) << r.stderr_text;
    EXPECT_NE(r.stderr_text.find("cpdit: error:"), std::string::npos) << r.stderr_text;
    EXPECT_FALSE(fs::exists(out));
  }
}

}  // namespace
}  // namespace cpdit::parallel
