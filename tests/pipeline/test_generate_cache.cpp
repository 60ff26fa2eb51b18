// `cpdit generate --cache`: the summary counts the transformer calls computed and skipped (TaylorSeer: and
// its hooked modules' calls computed and predicted), a calibration
// prints ratios that, passed back as --cache magcache:T,ratios=..., give diffusers' MagCache run, and bad
// specs or models without a cache are one-line errors with exit code 2.
#include "pipeline/cache_case.hpp"
#include "support/expect_cli_refused.hpp"
#include "support/run_cli.hpp"

#include <cpdit/io/safetensors.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

namespace cpdit::pipeline {
namespace {

using cpdit::testing::expect_cli_refused;
using cpdit::testing::fixture_dir;
using cpdit::testing::in_fixture_layout;
using cpdit::testing::read_json_file;
using cpdit::testing::run_cli;
using cpdit::testing::TempDir;

// As the fixture parity tests: diffusers' float32 run against ours, summation order only.
constexpr double kLatentsTolerance = 1e-4;
// TaylorSeer's bf16 factors (its default): a factor within those differences of a bf16 rounding tie rounds
// one bf16 step the other way (tests/pipeline/test_step_cache_fixtures.cpp says more); 1e-3 there.
constexpr double kBf16FactorsTolerance = 1e-3;

// generate on a cache fixture with diffusers' call (call.json), embeddings and initial latents.
std::string fixture_args(const std::string& fixture) {
  const std::string dir = fixture_dir(fixture), inputs = dir + "/inputs.safetensors";
  const nlohmann::json call = read_json_file(dir + "/call.json");
  std::string args = "generate --model " + dir + "/pipeline --embeddings " + inputs + " --latents " + inputs +
                     " --threads 1 --steps " + std::to_string(call.at("num_inference_steps").get<int>()) +
                     " --height " + std::to_string(call.at("height").get<int>()) + " --width " +
                     std::to_string(call.at("width").get<int>());  // guidance_scale: both pipelines' default
  if (call.contains("num_frames")) args += " --frames " + std::to_string(call.at("num_frames").get<int>());
  return args;
}

std::string pattern_of(const std::string& fixture, const std::string& name) {
  return read_json_file(fixture_dir(fixture) + "/skip_patterns.json").at(name).at("compact").get<std::string>();
}

TEST(GenerateCache, SummaryCountsCallsComputedAndSkipped) {
  TempDir dir("generate_cache");
  const std::string out = dir.file("out.safetensors");
  const auto r = run_cli(fixture_args("cache_flux_tiny") + " --cache fbcache:1.0 --ring 2 --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string pattern = pattern_of("cache_flux_tiny", "fbc_T1.0");
  const auto computed = std::count(pattern.begin(), pattern.end(), 'F');
  const std::string line = "cache        " + nn::step_cache_name(nn::parse_step_cache("fbcache:1.0")) + ": " +
                           std::to_string(computed) + " of " + std::to_string(pattern.size()) +
                           " transformer calls computed, " + std::to_string(pattern.size() - computed) + " skipped\n";
  EXPECT_NE(r.out.find(line), std::string::npos) << r.out;
  const Tensor expected = io::load_safetensors(fixture_dir("cache_flux_tiny") + "/expected.safetensors").at("fbc_T1.0");
  EXPECT_LT(max_abs_diff(in_fixture_layout(io::load_safetensors(out).at("latents"), expected), expected), kLatentsTolerance);

  const auto json = run_cli(fixture_args("cache_flux_tiny") + " --cache fbcache:1.0 --json --out " + dir.file("j.safetensors"));
  ASSERT_EQ(json.code, 0) << json.err;
  const nlohmann::json s = nlohmann::json::parse(json.out);
  EXPECT_EQ(s.at("cache").at("calls_computed").get<int64_t>(), computed);
  EXPECT_EQ(s.at("cache").at("calls_skipped").get<int64_t>(), int64_t(pattern.size()) - computed);
}

// The printed list of a pass ("mag ratios   cond: ratios=a/b/c").
std::string printed_ratios(const std::string& out, const std::string& pass) {
  const std::string key = "mag ratios   " + pass + ": ";
  const size_t at = out.find(key);
  if (at == std::string::npos) return "";
  const size_t start = at + key.size();
  return out.substr(start, out.find('\n', start) - start);
}

// Wan's calibration prints each pass's ratios (diffusers prints one list per cache context); the
// conditional pass's, passed back for both passes as the fixture's case did, gives diffusers' run.
TEST(GenerateCache, CalibratedRatiosPassedBackGiveDiffusersMagCache) {
  TempDir dir("generate_cache_calibrate");
  const std::string args = fixture_args("cache_wan_tiny");
  const auto calibration = run_cli(args + " --cache magcache:calibrate --out " + dir.file("c.safetensors"));
  ASSERT_EQ(calibration.code, 0) << calibration.err;
  const std::string cond = printed_ratios(calibration.out, "cond");
  ASSERT_FALSE(cond.empty()) << calibration.out;
  EXPECT_FALSE(printed_ratios(calibration.out, "uncond").empty()) << calibration.out;

  const std::string out = dir.file("out.safetensors");
  const auto r = run_cli(args + " --cache magcache:0.06," + cond + " --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string pattern = pattern_of("cache_wan_tiny", "magcache_calibrated_T0.06");
  const auto skipped = std::count(pattern.begin(), pattern.end(), 'S');
  EXPECT_NE(r.out.find(", " + std::to_string(skipped) + " skipped\n"), std::string::npos) << r.out;
  const Tensor expected =
      io::load_safetensors(fixture_dir("cache_wan_tiny") + "/expected.safetensors").at("magcache_calibrated_T0.06");
  EXPECT_LT(max_abs_diff(in_fixture_layout(io::load_safetensors(out).at("latents"), expected), expected), kLatentsTolerance);
}

// TaylorSeer on Wan's attentions (the family's patterns): the summary counts the calls that predicted
// some attention as skipped, and the hooked module calls computed and predicted; the latents are
// diffusers' run with those patterns.
TEST(GenerateCache, TaylorSeerSummaryCountsPredictedAttentions) {
  TempDir dir("generate_cache_taylorseer");
  const std::string out = dir.file("out.safetensors");
  const auto r = run_cli(fixture_args("cache_wan_tiny") + " --cache taylorseer:interval=2,before=2 --json --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string name = "taylorseer_interval2_before2_wan_attn_patterns";
  const nlohmann::json calls = read_json_file(fixture_dir("cache_wan_tiny") + "/skip_patterns.json").at(name);
  int64_t ran = 0, attentions = 0;
  for (const nlohmann::json& call : calls.at("per_call")) {
    ran += call.at("n_attn_run").get<int64_t>();
    attentions += int64_t(calls.at("attn_names").size());
  }
  const std::string pattern = calls.at("compact").get<std::string>();
  const nlohmann::json s = nlohmann::json::parse(r.out).at("cache");
  EXPECT_EQ(s.at("spec").get<std::string>(), "taylorseer:interval=2,before=2,order=1,module=^blocks\\.\\d+\\.attn1$,"
                                              "module=^blocks\\.\\d+\\.attn2$");
  EXPECT_EQ(s.at("calls_skipped").get<int64_t>(), std::count(pattern.begin(), pattern.end(), 'S'));
  EXPECT_EQ(s.at("modules_computed").get<int64_t>(), ran);
  EXPECT_EQ(s.at("modules_predicted").get<int64_t>(), attentions - ran);
  const Tensor expected = io::load_safetensors(fixture_dir("cache_wan_tiny") + "/expected.safetensors").at(name);
  EXPECT_LT(max_abs_diff(io::load_safetensors(out).at("latents"), expected), kBf16FactorsTolerance);

  const auto text = run_cli(fixture_args("cache_wan_tiny") + " --cache taylorseer:interval=2,before=2 --out " +
                            dir.file("t.safetensors"));
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("(" + std::to_string(ran) + " hooked module calls computed, " +
                          std::to_string(attentions - ran) + " predicted)\n"),
            std::string::npos)
      << text.out;
}

TEST(GenerateCache, BadSpecsAreOneLineErrors) {
  TempDir dir("generate_cache_bad");
  const std::string out = dir.file("out.safetensors");
  const std::string flux = fixture_args("cache_flux_tiny") + " --out " + out + " --cache ";
  expect_cli_refused(flux + "foo:bar", "unknown kind 'foo'", out);
  expect_cli_refused(flux + "fbcache:-1", "the threshold must be a number >= 0, got '-1'", out);
  expect_cli_refused(flux + "fbcache:bar", "the threshold must be a number >= 0, got 'bar'", out);
  expect_cli_refused(flux + "fbcache:0.1,calibrate", "'calibrate' is not a setting of fbcache", out);
  expect_cli_refused(flux + "magcache:0.06,max_skip=2", "'max_skip=2' is not a setting of magcache", out);
  expect_cli_refused(flux + "magcache:0.06,max_skip_steps=1.5", "max_skip_steps must be a whole number", out);
  expect_cli_refused(flux + "magcache:retention_ratio=2", "retention_ratio is a share of the steps", out);
  expect_cli_refused(flux + "magcache:ratios=1/x", "a ratio must be a number >= 0, got 'x'", out);
  expect_cli_refused(flux + "taylorseer:interval=0", "interval must be a whole number >= 1, got '0'", out);
  expect_cli_refused(flux + "taylorseer:module=+", "TaylorSeer: '+' is not a regex", out);
  expect_cli_refused(flux + "taylorseer:module=^nothing",
                     "TaylorSeer: no module of FluxTransformer2DModel matches ^nothing (give module=REGEX", out);
}

TEST(GenerateCache, ModelsWithoutACacheOrRatiosAreRefused) {
  TempDir dir("generate_cache_refused");
  const std::string out = dir.file("out.safetensors");
  // Wan has no released ratios in diffusers: a run must calibrate or give them.
  expect_cli_refused(fixture_args("cache_wan_tiny") + " --cache magcache --out " + out,
                     "needs its per-step ratios: run once with --cache magcache:calibrate", out);
  // Diffusion forcing's calls are no steps of one denoising for a cache to skip.
  const std::string forcing = fixture_dir("skyreels_df_tiny");
  expect_cli_refused("generate --model " + forcing + "/pipeline --embeddings " + forcing +
                         "/inputs.safetensors --frames 21 --height 48 --width 32 --steps 2 --cache fbcache:0.1 --out " +
                         out,
                     "--cache is not supported for SkyReels-V2's diffusion forcing", out);
  // Wan 2.2 A14B switches experts mid-loop: one cache state cannot serve two transformers.
  const std::string experts = fixture_dir("wan22_experts");
  expect_cli_refused("generate --model " + experts + "/t2v/pipeline --embeddings " + experts +
                         "/inputs.safetensors --frames 9 --height 48 --width 32 --steps 4 --cache fbcache:0.1 --out " +
                         out,
                     "--cache on Wan 2.2's two experts is not supported", out);
}

}  // namespace
}  // namespace cpdit::pipeline
