// The LTX-Video pipeline's pieces around its loop: the 1x1x1 token packing, the VAE factors as
// LTXPipeline reads them, the latent shape rules and the RoPE interpolation scale. The loop itself is
// checked against diffusers in test_pipeline_parity.cpp.
#include "support/run_cli.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/pipeline/ltx_pipeline.hpp>

#include <gtest/gtest.h>

namespace cpdit::pipeline {
namespace {

TEST(LtxPipeline, PackingPutsChannelsLastOverFramesRowsColumns) {
  // (1, 2, 2, 1, 3): channel c, frame f, column x holds 100c + 10f + x.
  std::vector<float> values;
  for (int c = 0; c < 2; ++c)
    for (int f = 0; f < 2; ++f)
      for (int x = 0; x < 3; ++x) values.push_back(float(100 * c + 10 * f + x));
  const Tensor latents = Tensor::from_vector(values, {1, 2, 2, 1, 3});
  const Tensor tokens = ltx_pack(latents);
  ASSERT_EQ(tokens.shape(), (Shape{1, 6, 2}));
  // Token f·3 + x holds its two channels side by side.
  EXPECT_EQ(tokens.data<float>()[(1 * 3 + 2) * 2 + 0], 12.0f);
  EXPECT_EQ(tokens.data<float>()[(1 * 3 + 2) * 2 + 1], 112.0f);
  EXPECT_EQ(max_abs_diff(ltx_unpack(tokens, 2, 1, 3), latents), 0.0);
  EXPECT_THROW(ltx_unpack(tokens, 2, 2, 3), Error);  // 12 tokens named, 6 given
}

TEST(LtxPipeline, VaeFactorsAreTheRatiosOrPatchTimesScalingLevels) {
  // The released VAEs' config: patch 4, three of four encoder levels scaling.
  const auto released = LtxVaeFactors::from_json(nlohmann::json::parse(
      R"({"patch_size": 4, "patch_size_t": 1, "spatio_temporal_scaling": [true, true, true, false]})"));
  EXPECT_EQ(released.spatial, 32);
  EXPECT_EQ(released.temporal, 8);
  // Explicit ratios win over the levels.
  const auto given = LtxVaeFactors::from_json(nlohmann::json::parse(
      R"({"patch_size": 4, "spatio_temporal_scaling": [true, true], "spatial_compression_ratio": 16,)"
      R"( "temporal_compression_ratio": 4})"));
  EXPECT_EQ(given.spatial, 16);
  EXPECT_EQ(given.temporal, 4);
  EXPECT_THROW(LtxVaeFactors::from_json(nlohmann::json::parse(R"({"patch_size": 0})")), Error);
  EXPECT_THROW(LtxVaeFactors::from_json(nlohmann::json::parse(R"({"spatio_temporal_scaling": [1, 0]})")), Error);
}

TEST(LtxPipeline, LatentShapeAndRopeScaleFollowTheVae) {
  models::ltx_video::LtxVideoConfig config;  // 128 latent channels
  EXPECT_EQ(ltx_latent_shape(config, 1, 161, 512, 704), (Shape{1, 128, 21, 16, 22}));
  EXPECT_THROW(ltx_latent_shape(config, 1, 160, 512, 704), Error);  // not 8k + 1
  EXPECT_THROW(ltx_latent_shape(config, 1, 161, 500, 704), Error);  // not a multiple of 32
  const std::array<double, 3> scale = ltx_rope_interpolation_scale({}, 25);
  EXPECT_EQ(scale[0], 8.0 / 25);
  EXPECT_EQ(scale[1], 32.0);
  EXPECT_EQ(scale[2], 32.0);
  EXPECT_THROW(ltx_rope_interpolation_scale({}, 0), Error);
}

// The preset from a prompt to a video: its built-in T5 and VAE fit the transformer (the VAE's 32x
// and 8x are the loop's factors), and two ranks make what one makes.
TEST(LtxPipeline, TinyPresetMakesAVideoOnOneAndTwoRanks) {
  cpdit::testing::TempDir dir("ltx_preset");
  nn::TensorMap runs[2];
  for (int ranks : {1, 2}) {
    const std::string out = dir.file("clip" + std::to_string(ranks) + ".safetensors");
    const auto r = cpdit::testing::run_cli("generate --preset ltx-tiny --prompt 'a red fox' --frames 9 --height 64 "
                                           "--width 96 --steps 2 --threads 1 --ranks " + std::to_string(ranks) +
                                           " --out " + out);
    ASSERT_EQ(r.code, 0) << r.err;
    runs[ranks - 1] = io::load_safetensors(out);
  }
  EXPECT_EQ(runs[0].at("latents").shape(), (Shape{1, 8, 2, 2, 3}));
  EXPECT_EQ(runs[0].at("video").shape(), (Shape{1, 9, 64, 96, 3}));
  // Two ranks sum the attention in another order: 1e-4 as the pipeline parity tests.
  EXPECT_LT(max_abs_diff(runs[1].at("latents"), runs[0].at("latents")), 1e-4);
  EXPECT_LT(max_abs_diff(runs[1].at("video"), runs[0].at("video")), 1e-4);
}

}  // namespace
}  // namespace cpdit::pipeline
