// The family registry: each transformer class runs its own family's loop, each preset belongs to the
// family of its transformer, and a class with no family is refused naming the classes that have one
// (nothing falls through to FLUX.1).
#include "support/expect_error.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/pipeline/family.hpp>
#include <cpdit/pipeline/presets.hpp>

#include <gtest/gtest.h>

namespace cpdit::pipeline {
namespace {

TEST(FamilyRegistry, EachTransformerClassRunsItsOwnFamily) {
  EXPECT_EQ(family_for_class("FluxTransformer2DModel").name(), "flux");
  EXPECT_EQ(family_for_class("WanTransformer3DModel").name(), "wan");
  EXPECT_EQ(family_for_class("QwenImageTransformer2DModel").name(), "qwenimage");
  EXPECT_EQ(family_for_class("SkyReelsV2Transformer3DModel").name(), "skyreels_v2");
  EXPECT_EQ(family_for_class("LTXVideoTransformer3DModel").name(), "ltx_video");
  for (const Family* f : families()) EXPECT_EQ(&family_for_class(f->transformer_class()), f);
}

TEST(FamilyRegistry, AClassWithoutAFamilyIsRefusedNamingTheOnesWithOne) {
  cpdit::testing::expect_error([] { family_for_class("AutoencoderKL"); },
                               {"AutoencoderKL", "FluxTransformer2DModel", "WanTransformer3DModel"});
}

TEST(FamilyRegistry, EachPipelineClassRunsOnItsFamilyAndOthersAreRefusedByName) {
  EXPECT_EQ(family_for_pipeline("FluxImg2ImgPipeline").name(), "flux");
  EXPECT_EQ(family_for_pipeline("WanImageToVideoPipeline").name(), "wan");
  EXPECT_EQ(family_for_pipeline("SkyReelsV2DiffusionForcingPipeline").name(), "skyreels_v2");
  EXPECT_EQ(family_for_pipeline("QwenImagePipeline").name(), "qwenimage");
  EXPECT_EQ(family_for_pipeline("LTXPipeline").name(), "ltx_video");
  for (const Family* f : families())
    for (const std::string& name : f->pipeline_classes()) EXPECT_EQ(&family_for_pipeline(name), f) << name;
  cpdit::testing::expect_error([] { family_for_pipeline("StableDiffusionXLPipeline"); },
                               {"pipeline 'StableDiffusionXLPipeline' is not supported", "FluxPipeline", "WanPipeline",
                                "LTXPipeline"});
}

TEST(FamilyRegistry, EveryPresetIsOpenedAsItsFamilysClass) {
  // The tiny ones are built (the mini ones are the same classes at real widths, seconds each to build).
  for (const std::string& name : preset_names()) {
    if (!name.ends_with("-tiny")) continue;
    EXPECT_EQ(preset_model(name, 1, {}).class_name, family_for_preset(name).transformer_class()) << name;
  }
  EXPECT_EQ(family_for_preset("flux-mini").name(), "flux");
  EXPECT_EQ(family_for_preset("qwen-mini").name(), "qwenimage");
  cpdit::testing::expect_error([] { family_for_preset("flux-huge"); }, {"flux-huge", "flux-tiny"});
}

TEST(FamilyRegistry, VideoFamiliesAreTheOnesWithFrames) {
  EXPECT_FALSE(family_for_class("FluxTransformer2DModel").video());
  EXPECT_FALSE(family_for_class("QwenImageTransformer2DModel").video());
  EXPECT_TRUE(family_for_class("WanTransformer3DModel").video());
  EXPECT_TRUE(family_for_class("SkyReelsV2Transformer3DModel").video());
  EXPECT_TRUE(family_for_class("LTXVideoTransformer3DModel").video());
}

}  // namespace
}  // namespace cpdit::pipeline
