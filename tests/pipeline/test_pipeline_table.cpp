// generate's pipeline table: each transformer class runs its own denoising loop, and a class with
// no loop is refused naming the classes that have one (nothing falls through to FLUX.1).
#include "support/expect_error.hpp"

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
  cpdit::testing::expect_error([] { pipeline_for("AutoencoderKL"); },
                               {"AutoencoderKL", "FluxTransformer2DModel", "WanTransformer3DModel"});
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
