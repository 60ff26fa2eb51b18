// `cpdit forward` on the skyreels_v2_tiny fixture: the command finds SkyReelsV2Transformer3DModel in
// config.json (its tensors alone look like Wan's), takes the diffusion-forcing inputs as diffusers
// names them and writes diffusers' sample, on one rank and under context parallelism.
#include "models/skyreels_v2_fixture.hpp"
#include "support/forward_cli.hpp"
#include "support/relative_error.hpp"

#include <gtest/gtest.h>

namespace cpdit::models::skyreels_v2 {
namespace {

TEST(SkyReelsV2Cli, ForwardFindsTheModelClassAndWritesTheSample) {
  // 1e-5 of the output range: float32 rounding, as in test_skyreels_v2.cpp.
  cpdit::testing::expect_forward_cli_sample(testing::fixture_dir(),
                                            cpdit::testing::fixture_file(testing::kFixture, "expected").at("sample"),
                                            cpdit::testing::relative_error, 1e-5);
}

}  // namespace
}  // namespace cpdit::models::skyreels_v2
