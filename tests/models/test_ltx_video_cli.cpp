// `cpdit forward` on the ltx_tiny fixture: the class is found in config.json, and the sample is
// diffusers' on one rank and under context parallelism (the text split with the tokens).
#include "models/ltx_video_fixture.hpp"
#include "support/forward_cli.hpp"

#include <gtest/gtest.h>

namespace cpdit::models::ltx_video {
namespace {

using testing::fixture_dir;

TEST(LtxVideoCli, ForwardWritesTheSample) {
  cpdit::testing::expect_forward_cli_sample(fixture_dir(), testing::fixture_intermediates().at("proj_out"),
                                            testing::relative_error, testing::kRelativeTolerance);
}

TEST(LtxVideoCli, BadInputIsOneLine) {
  cpdit::testing::TempDir dir("ltx_video_cli_bad");
  auto inputs = testing::fixture_inputs();
  inputs["height"] = Tensor::full({1}, 5.0, DType::i64);  // 40 tokens; hidden_states holds 24
  const std::string bad = dir.file("bad.safetensors");
  io::save_safetensors(bad, inputs);
  auto r = cpdit::testing::run_cli("forward --model " + fixture_dir() + "/weights.safetensors --config " +
                                   fixture_dir() + "/config.json --inputs " + bad + " --output " +
                                   dir.file("out.safetensors"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("num_frames x height x width"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace cpdit::models::ltx_video
