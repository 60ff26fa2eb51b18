// `cpdit forward` on the qwenimage_tiny fixture: the class is found in config.json, and the sample
// is diffusers' on one rank and under context parallelism.
#include "models/qwenimage_fixture.hpp"
#include "support/run_cli.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>

namespace cpdit::models::qwenimage {
namespace {

using testing::fixture_dir;

TEST(QwenImageCli, ForwardWritesTheSample) {
  cpdit::testing::TempDir dir("qwenimage_cli");
  const Tensor expected = testing::fixture_intermediates().at("proj_out");
  for (std::string layout : {"", " --ring 2 --ulysses 2", " --ring 3 --rotate allgather"}) {
    const std::string out = dir.file("sample.safetensors");
    auto r = cpdit::testing::run_cli("forward --model " + fixture_dir() + "/weights.safetensors --config " +
                                     fixture_dir() + "/config.json --inputs " + fixture_dir() +
                                     "/inputs.safetensors --threads 1 --output " + out + layout);
    ASSERT_EQ(r.code, 0) << layout << "\n" << r.err;
    EXPECT_LT(testing::relative_error(io::load_safetensors(out).at("sample"), expected), testing::kRelativeTolerance)
        << layout;
  }
}

}  // namespace
}  // namespace cpdit::models::qwenimage
