// generate's pipeline table: each transformer class runs its own denoising loop, and a class with
// no loop is refused naming the classes that have one (nothing falls through to FLUX.1).
#include <cpdit/core/error.hpp>
#include <cpdit/pipeline/pipeline_table.hpp>
#include <cpdit/pipeline/presets.hpp>

#include <gtest/gtest.h>

namespace cpdit::pipeline {
namespace {

TEST(PipelineTable, EachTransformerClassRunsItsOwnLoop) {
  EXPECT_EQ(pipeline_for("FluxTransformer2DModel"), PipelineKind::flux);
  EXPECT_EQ(pipeline_for("WanTransformer3DModel"), PipelineKind::wan);
  EXPECT_EQ(pipeline_for("QwenImageTransformer2DModel"), PipelineKind::qwenimage);
  EXPECT_EQ(pipeline_for("SkyReelsV2Transformer3DModel"), PipelineKind::skyreels_v2);
  EXPECT_EQ(pipeline_for("LTXVideoTransformer3DModel"), PipelineKind::ltx_video);
}

TEST(PipelineTable, AClassWithoutALoopIsRefusedNamingTheOnesWithOne) {
  try {
    pipeline_for("AutoencoderKL");
    ADD_FAILURE() << "a VAE class was given a denoising loop";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("AutoencoderKL"), std::string::npos) << message;
    EXPECT_NE(message.find("FluxTransformer2DModel"), std::string::npos) << message;
    EXPECT_NE(message.find("WanTransformer3DModel"), std::string::npos) << message;
  }
}

TEST(PipelineTable, PresetsAreOpenedAsTheirRegisteredClass) {
  EXPECT_EQ(preset_model("flux-tiny", 1, {}).class_name, "FluxTransformer2DModel");
  EXPECT_EQ(preset_model("wan-tiny", 1, {}).class_name, "WanTransformer3DModel");
  EXPECT_EQ(preset_model("skyreels-tiny", 1, {}).class_name, "SkyReelsV2Transformer3DModel");
  EXPECT_EQ(preset_model("ltx-tiny", 1, {}).class_name, "LTXVideoTransformer3DModel");
  EXPECT_THROW(preset_model("flux-huge", 1, {}), Error);
}

}  // namespace
}  // namespace cpdit::pipeline
