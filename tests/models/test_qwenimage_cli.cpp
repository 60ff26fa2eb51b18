// `cpdit forward` on the qwenimage_tiny fixture: the class is found in config.json, and the sample
// is diffusers' on one rank and under context parallelism.
#include "models/qwenimage_fixture.hpp"
#include "support/forward_cli.hpp"

#include <gtest/gtest.h>

namespace cpdit::models::qwenimage {
namespace {

using testing::fixture_dir;

TEST(QwenImageCli, ForwardWritesTheSample) {
  cpdit::testing::expect_forward_cli_sample(fixture_dir(), testing::fixture_intermediates().at("proj_out"),
                                            testing::relative_error, testing::kRelativeTolerance);
}

}  // namespace
}  // namespace cpdit::models::qwenimage
