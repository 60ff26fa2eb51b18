// `cpdit forward` on the skyreels_v2_tiny fixture: the command finds SkyReelsV2Transformer3DModel in
// config.json (its tensors alone look like Wan's), takes the diffusion-forcing inputs as diffusers
// names them and writes diffusers' sample, on one rank and under context parallelism.
#include "models/skyreels_v2_fixture.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace cpdit::models::skyreels_v2 {
namespace {

using testing::fixture_dir;

TEST(SkyReelsV2Cli, ForwardFindsTheModelClassAndWritesTheSample) {
  cpdit::testing::TempDir dir("skyreels_cli");
  const Tensor expected = io::load_safetensors(fixture_dir() + "/expected.safetensors").at("sample");
  double range = 0;
  for (int64_t i = 0; i < expected.numel(); ++i) range = std::max(range, double(std::fabs(expected.data<float>()[i])));
  const std::string out = dir.file("sample.safetensors");
  for (const std::string layout : {"", " --ring 2 --ulysses 2", " --ring 3"}) {
    const std::string command = std::string(CPDIT_BINARY) + " forward --model " + fixture_dir() +
                                "/weights.safetensors --config " + fixture_dir() + "/config.json --inputs " +
                                fixture_dir() + "/inputs.safetensors --threads 1 --output " + out + layout + " > /dev/null";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    // 1e-5 of the output range: float32 rounding, as in test_skyreels_v2.cpp.
    EXPECT_LE(max_abs_diff(io::load_safetensors(out).at("sample"), expected), 1e-5 * range) << command;
  }
}

}  // namespace
}  // namespace cpdit::models::skyreels_v2
