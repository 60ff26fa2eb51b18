// The model registry: the class a checkpoint names (diffusers' _class_name, transformers'
// architectures, else its tensor names) picks the entry; a class nobody registered is refused with
// the known ones, never run as another model; replicas share the weights loaded once.
#include "models/flux_fixture.hpp"
#include "support/expect_error.hpp"
#include "support/temp_dir.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/models/registry.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace cpdit::models {
namespace {

namespace fs = std::filesystem;
using cpdit::testing::TempDir;

std::string fixture(const std::string& family, const std::string& file) {
  return std::string(CPDIT_TEST_DATA) + "/fixtures/" + family + "_tiny/" + file;
}

// A transformer folder holding the FLUX.1 fixture's weights and the given config.json text.
std::string flux_weights_with_config(const TempDir& dir, const std::string& config) {
  fs::copy_file(fixture("flux", "weights.safetensors"), dir.path() / "diffusion_pytorch_model.safetensors");
  std::ofstream(dir.file("config.json")) << config;
  return dir.path().string();
}

TEST(ModelRegistry, TellsTheClassFromDiffusersAndTransformersConfigsAndTensorNames) {
  auto named = checkpoint_class(io::resolve_model(fixture("wan", "weights.safetensors")));
  ASSERT_TRUE(named);
  EXPECT_EQ(named->name, "WanTransformer3DModel");
  EXPECT_NE(named->told_by.find("_class_name"), std::string::npos);

  TempDir dir("registry_architectures");
  named =
      checkpoint_class(io::resolve_model(flux_weights_with_config(dir, R"({"architectures": ["T5EncoderModel"]})")));
  ASSERT_TRUE(named);
  EXPECT_EQ(named->name, "T5EncoderModel");  // named, registered or not
  EXPECT_NE(named->told_by.find("architectures"), std::string::npos);

  for (const std::string family : {"flux", "wan"}) {
    named = checkpoint_class(io::ModelFiles{fixture(family, "weights.safetensors"), std::nullopt});  // no config
    ASSERT_TRUE(named) << family;
    EXPECT_EQ(named->name, family == "flux" ? "FluxTransformer2DModel" : "WanTransformer3DModel");
    EXPECT_EQ(named->told_by, "tensor names");
  }
}

TEST(ModelRegistry, AnUnknownClassIsRefusedNamingTheKnownOnesNotRunAsFlux) {
  // The weights are FLUX.1's, so falling through to tensor names would wrongly succeed.
  for (const std::string config :
       {R"({"_class_name": "MysteryTransformerModel"})", R"({"architectures": ["MysteryModel"]})"}) {
    TempDir dir("registry_unknown");
    const std::string path = flux_weights_with_config(dir, config);
    SCOPED_TRACE(config);
    cpdit::testing::expect_error([&] { open_model(path, std::nullopt, {}); },
                                 {"Mystery", "FluxTransformer2DModel", "WanTransformer3DModel"});
  }
}

TEST(ModelRegistry, ReplicasShareTheWeightsLoadedOnce) {
  // bf16 matrices are converted from the f32 file: shared only if the conversion happened once.
  for (DType matrices : {DType::f32, DType::bf16}) {
    const LoadedModel loaded =
        open_model(fixture("flux", "weights.safetensors"), fixture("flux", "config.json"), nn::LoadOptions{matrices});
    EXPECT_EQ(loaded.class_name, "FluxTransformer2DModel");
    EXPECT_EQ(loaded.heads, std::any_cast<const flux::FluxConfig&>(loaded.config).num_attention_heads);
    auto a = loaded.replica(), b = loaded.replica();
    auto pa = a->named_parameters(), pb = b->named_parameters();
    ASSERT_EQ(pa.size(), pb.size());
    ASSERT_FALSE(pa.empty());
    bool converted = false;
    for (size_t i = 0; i < pa.size(); ++i) {
      ASSERT_EQ(pa[i].first, pb[i].first);
      EXPECT_EQ(pa[i].second->value.values().raw(), pb[i].second->value.values().raw()) << pa[i].first;
      converted |= pa[i].second->value.dtype() == DType::bf16;
    }
    EXPECT_EQ(converted, matrices == DType::bf16);
  }
}

}  // namespace
}  // namespace cpdit::models
