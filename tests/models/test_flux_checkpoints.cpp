// The same FLUX weights stored as bf16 and sharded with an index give the same sample, and the
// original single-file layout is converted as diffusers converts it.
#include "models/flux_fixture.hpp"

#include <cpdit/core/precision.hpp>
#include <cpdit/io/json.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

namespace cpdit::models::flux {
namespace {

using testing::fixture_checkpoint;
using testing::fixture_dir;
using testing::fixture_inputs;
using testing::TempDir;

Tensor sample_of(const FluxCheckpoint& ck) { return load_flux(ck)->forward(fixture_inputs()).at("sample"); }

void copy_config(const TempDir& dir) {
  std::filesystem::copy_file(fixture_dir() + "/config.json", dir.file("config.json"));
}

TEST(FluxCheckpoints, Bf16WeightsAreConvertedOnLoad) {
  FluxCheckpoint ck = fixture_checkpoint();
  TempDir dir("flux_bf16");
  std::map<std::string, Tensor> bf16;
  nn::StateDict rounded;
  for (const auto& [name, t] : ck.state) {
    bf16[name] = t.values().to(DType::bf16);
    rounded[name] = bf16[name].to(DType::f32);
  }
  io::save_safetensors(dir.file("diffusion_pytorch_model.safetensors"), bf16);
  copy_config(dir);
  FluxCheckpoint loaded = read_flux_checkpoint(dir.path().string());
  EXPECT_EQ(loaded.state.at("proj_out.weight").dtype(), DType::bf16);
  FluxCheckpoint reference = ck;
  reference.state = rounded;
  EXPECT_EQ(max_abs_diff(sample_of(loaded), sample_of(reference)), 0.0);
  // Weights kept in bf16 (--dtype bf16 without bf16 arithmetic) are widened to f32 exactly for each
  // product: the same numbers through the same sgemm, so the same sample bit for bit.
  Tensor bf16_path = load_flux(loaded, nn::LoadOptions{DType::bf16})->forward(fixture_inputs()).at("sample");
  EXPECT_EQ(max_abs_diff(bf16_path, sample_of(reference)), 0.0);
}

// --dtype bf16's arithmetic end to end: under MatmulPrecision::bf16 every Linear multiplies
// bf16-rounded activations by the bf16 weights (f32 accumulation; norms, modulation, softmax and
// residuals in f32). The sample moves off the exact f32 result by bf16 rounding, no more.
TEST(FluxCheckpoints, Bf16ArithmeticStaysWithinBf16RoundingOfF32) {
  FluxCheckpoint ck = fixture_checkpoint();
  const Tensor exact = load_flux(ck, nn::LoadOptions{DType::bf16})->forward(fixture_inputs()).at("sample");
  Tensor bf16_compute;
  {
    ScopedMatmulPrecision precision(MatmulPrecision::bf16);
    bf16_compute = load_flux(ck, nn::LoadOptions{DType::bf16})->forward(fixture_inputs()).at("sample");
  }
  double scale = 0;
  for (int64_t i = 0; i < exact.numel(); ++i) scale = std::max(scale, std::abs(double(exact.data<float>()[i])));
  const double relative = max_abs_diff(bf16_compute, exact) / scale;
  std::printf("bf16 arithmetic: max |diff| / max |sample| = %.3g\n", relative);
  EXPECT_GT(relative, 0.0);  // the bf16 path really ran
  // bf16 keeps 8 significant bits (unit roundoff 2^-9 = 0.002). The rounded layers in a row leave the
  // sample about 3 units off (0.0054 measured); 5 units allow for another seed, a slip of tens would not pass.
  EXPECT_LT(relative, 0.01);
}

TEST(FluxCheckpoints, ShardedWithIndexGivesTheSameSample) {
  FluxCheckpoint ck = fixture_checkpoint();
  TempDir dir("flux_sharded");
  std::map<std::string, Tensor> shards[2];
  nlohmann::json weight_map;
  int64_t total = 0, i = 0;
  const char* files[2] = {"diffusion_pytorch_model-00001-of-00002.safetensors",
                          "diffusion_pytorch_model-00002-of-00002.safetensors"};
  for (const auto& [name, t] : ck.state) {
    shards[i % 2][name] = t.values();
    weight_map[name] = files[i % 2];
    total += int64_t(t.nbytes());
    ++i;
  }
  for (int s = 0; s < 2; ++s) io::save_safetensors(dir.file(files[s]), shards[s]);
  nlohmann::json index{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  io::write_text_atomic(dir.file("diffusion_pytorch_model.safetensors.index.json"), index.dump());
  copy_config(dir);
  EXPECT_EQ(max_abs_diff(sample_of(read_flux_checkpoint(dir.path().string())), sample_of(ck)), 0.0);
}

// The original (Black Forest Labs) single-file layout against diffusers' own converter: the fixture
// holds a random original-layout file, diffusers' conversion of it and the converted model's sample
// (tools/reference/flux_original_layout.py). Read with and without the `model.diffusion_model.`
// prefix, it gives diffusers' tensors bit for bit, hence the same sample.
TEST(FluxCheckpoints, OriginalSingleFileLayoutIsConvertedAsDiffusersConvertsIt) {
  const std::string fixture = std::string(CPDIT_TEST_DATA) + "/fixtures/flux_original_tiny";
  const std::map<std::string, Tensor> converted = io::load_safetensors(fixture + "/converted.safetensors");
  const Tensor diffusers_sample = io::load_safetensors(fixture + "/expected.safetensors").at("sample");
  TempDir dir("flux_original");
  // The tiny model's RoPE axes are not FLUX.1's: the config file supplies them, the rest is inferred.
  io::write_text_atomic(dir.file("axes.json"), R"({"axes_dims_rope": [4, 4, 8]})");
  std::map<std::string, Tensor> unprefixed;
  const std::string prefix = "model.diffusion_model.";
  for (const auto& [name, t] : io::load_safetensors(fixture + "/original.safetensors"))
    unprefixed[name.substr(prefix.size())] = t;
  io::save_safetensors(dir.file("unprefixed.safetensors"), unprefixed);
  for (const std::string& file : {fixture + "/original.safetensors", dir.file("unprefixed.safetensors")}) {
    SCOPED_TRACE(file);
    const FluxCheckpoint original = read_flux_checkpoint(file, dir.file("axes.json"));
    EXPECT_EQ(original.config.num_layers, 1);
    EXPECT_EQ(original.config.attention_head_dim, 16);
    ASSERT_EQ(original.state.size(), converted.size());
    for (const auto& [name, want] : converted) {
      ASSERT_TRUE(original.state.count(name)) << name;
      EXPECT_EQ(original.state.at(name).shape(), want.shape()) << name;
      EXPECT_EQ(max_abs_diff(original.state.at(name).values(), want), 0.0) << name;
    }
    // test_flux.cpp's tolerance against diffusers' forward: PyTorch's and our f32 sums differ in order.
    EXPECT_LT(max_abs_diff(sample_of(original), diffusers_sample), 1e-4);
  }
}

// single_file_tiny's flux1-tiny.safetensors: the original layout with a guidance embedding (FLUX.1-dev's
// guidance_in), no prefix; diffusers' converter made flux_transformer_diffusers/ from it, bit for bit.
TEST(FluxCheckpoints, OriginalLayoutWithGuidanceIsDiffusersConversion) {
  const std::string fixture = std::string(CPDIT_TEST_DATA) + "/fixtures/single_file_tiny";
  TempDir dir("flux_original_guidance");
  io::write_text_atomic(dir.file("axes.json"), R"({"axes_dims_rope": [4, 6, 6]})");  // FLUX.1's are too wide
  const FluxCheckpoint original = read_flux_checkpoint(fixture + "/flux1-tiny.safetensors", dir.file("axes.json"));
  EXPECT_TRUE(original.config.guidance_embeds);
  const nn::StateDict diffusers =
      nn::read_state_dict(io::Checkpoint::open(fixture + "/flux_transformer_diffusers/diffusion_pytorch_model.safetensors"));
  ASSERT_EQ(original.state.size(), diffusers.size());
  for (const auto& [name, want] : diffusers) {
    ASSERT_TRUE(original.state.count(name)) << name;
    EXPECT_EQ(max_abs_diff(original.state.at(name).values(), want.values()), 0.0) << name;
  }
  const nn::TensorMap in = io::load_safetensors(fixture + "/inputs.safetensors");
  // The fixture passes timestep and guidance raw; the model multiplies both by 1000, as diffusers' does.
  const nn::TensorMap inputs{{"hidden_states", in.at("flux_hidden_states")},
                             {"encoder_hidden_states", in.at("flux_encoder_hidden_states")},
                             {"pooled_projections", in.at("flux_pooled_projections")},
                             {"timestep", in.at("flux_timestep")},
                             {"img_ids", in.at("flux_img_ids")},
                             {"txt_ids", in.at("flux_txt_ids")},
                             {"guidance", in.at("flux_guidance")}};
  const Tensor want = io::load_safetensors(fixture + "/expected.safetensors").at("flux_transformer_sample");
  // As the test above: PyTorch's and our f32 sums differ in order only.
  EXPECT_LT(max_abs_diff(load_flux(original)->forward(inputs).at("sample"), want), 1e-4);
}

}  // namespace
}  // namespace cpdit::models::flux
