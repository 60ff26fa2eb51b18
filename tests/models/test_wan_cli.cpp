// `cpdit forward` on the wan_tiny fixture: the command finds the model class in config.json and
// writes diffusers' sample, on one rank and under context parallelism.
#include "models/wan_fixture.hpp"
#include "support/forward_cli.hpp"

#include <gtest/gtest.h>

#include <filesystem>

namespace cpdit::models::wan {
namespace {

namespace fs = std::filesystem;
using testing::fixture_dir;

// 1e-4 absolute, as test_wan.cpp: the fixture README's float32 bound, far below the usual mistakes.
constexpr double kTolerance = 1e-4;

Tensor expected_sample() { return cpdit::testing::fixture_file(testing::kFixture, "expected").at("sample"); }

TEST(WanCli, ForwardFindsTheModelClassAndWritesTheSample) {
  cpdit::testing::expect_forward_cli_sample(fixture_dir(), expected_sample(), max_abs_diff, kTolerance);
}

// A diffusers transformer folder (config.json beside diffusion_pytorch_model.safetensors) is a model
// path of its own.
TEST(WanCli, ForwardOpensADiffusersFolder) {
  cpdit::testing::TempDir dir("wan_cli");
  fs::create_directories(dir.path() / "model");
  fs::copy_file(fixture_dir() + "/config.json", dir.path() / "model" / "config.json");
  fs::copy_file(fixture_dir() + "/weights.safetensors", dir.path() / "model" / "diffusion_pytorch_model.safetensors");
  const std::string out = dir.file("sample.safetensors");
  const auto r = cpdit::testing::run_cli("forward --model " + dir.file("model") + " --inputs " + fixture_dir() +
                                         "/inputs.safetensors --threads 1 --ring 2 --ulysses 2 --output " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_LT(max_abs_diff(io::load_safetensors(out).at("sample"), expected_sample()), kTolerance);
}

}  // namespace
}  // namespace cpdit::models::wan
