// `cpdit forward` on the flux_tiny fixture: the sample, the same under context parallelism, and
// errors as one line with exit code 2 and nothing written.
#include "models/flux_fixture.hpp"
#include "support/forward_cli.hpp"

#include <gtest/gtest.h>

#include <fstream>

namespace cpdit::models::flux {
namespace {

using testing::fixture_dir;
using testing::TempDir;

using cpdit::testing::run_cli;

std::string model_args(const std::string& config = fixture_dir() + "/config.json") {
  return "forward --model " + fixture_dir() + "/weights.safetensors --config " + config + " --inputs " + fixture_dir() +
         "/inputs.safetensors --threads 1";
}

// 1e-4 absolute, as test_flux.cpp: the fixture README's float32 bound, far below the usual mistakes.
TEST(FluxCli, ForwardWritesTheSample) {
  cpdit::testing::expect_forward_cli_sample(
      fixture_dir(), cpdit::testing::fixture_file(testing::kFixture, "expected").at("sample"), max_abs_diff, 1e-4);
}

// The weight line of the summary: "weights ... (N bytes) ...".
int64_t resident_weight_bytes(const std::string& out) {
  const size_t end = out.find(" bytes)");
  const size_t begin = out.rfind('(', end);
  return end == std::string::npos || begin == std::string::npos ? -1
                                                                : std::stoll(out.substr(begin + 1, end - begin - 1));
}

TEST(FluxCli, ForwardHoldsOneCopyOfABf16Checkpoint) {
  TempDir dir("flux_cli_bf16");
  std::map<std::string, Tensor> bf16;
  int64_t bytes = 0;
  for (const auto& [name, t] : io::load_safetensors(fixture_dir() + "/weights.safetensors")) {
    bf16[name] = t.to(DType::bf16);
    bytes += int64_t(bf16[name].nbytes());
  }
  const std::string weights = dir.file("weights.safetensors");
  io::save_safetensors(weights, bf16);
  const std::string args = "forward --model " + weights + " --config " + fixture_dir() + "/config.json --inputs " +
                           fixture_dir() + "/inputs.safetensors --threads 1 --ring 2 --output " +
                           dir.file("s.safetensors");
  auto as_stored = run_cli(args);
  ASSERT_EQ(as_stored.code, 0) << as_stored.err;
  EXPECT_EQ(resident_weight_bytes(as_stored.out), bytes) << as_stored.out;
  auto widened = run_cli(args + " --dtype f32");
  ASSERT_EQ(widened.code, 0) << widened.err;
  EXPECT_EQ(resident_weight_bytes(widened.out), 2 * bytes) << widened.out;
}

TEST(FluxCli, ErrorsAreOneLineExitTwoAndWriteNothing) {
  TempDir dir("flux_cli_errors");
  std::string out = dir.file("never.safetensors");
  io::save_safetensors(
      dir.file("partial_inputs.safetensors"),
      {{"hidden_states", io::load_safetensors(fixture_dir() + "/inputs.safetensors").at("hidden_states")}});
  std::ofstream(dir.file("wrong.json")) << R"({"num_layers": 2, "axes_dims_rope": [4, 4, 8]})";
  std::vector<std::string> bad{
      model_args() + " --ring 2 --ranks 3",                                                   // impossible degrees
      model_args(dir.file("wrong.json")),                                    // weights != config
      "forward --model " + fixture_dir() + "/weights.safetensors --config " + fixture_dir() +  // missing inputs
          "/config.json --inputs " + dir.file("partial_inputs.safetensors"),
  };
  for (const auto& args : bad) {
    auto r = run_cli(args + " --output " + out);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.rfind("cpdit: error: ", 0), 0u) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << args;
  }
}

}  // namespace
}  // namespace cpdit::models::flux
