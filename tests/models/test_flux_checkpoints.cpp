// The same FLUX weights stored as bf16, sharded with an index, and in the original single-file
// layout (built here from the fixture with io::save_safetensors) give the same sample.
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
  // The bf16 GEMM path (weights kept in bf16) stays close to the same bf16-rounded weights in f32.
  Tensor bf16_path = load_flux(loaded, nn::LoadOptions{DType::bf16})->forward(fixture_inputs()).at("sample");
  EXPECT_LT(max_abs_diff(bf16_path, sample_of(reference)), 0.1);
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

// The original (Black Forest Labs) single-file layout, per spec/models.md §1.8.
std::map<std::string, Tensor> to_original_layout(const nn::StateDict& d, const std::string& prefix) {
  std::map<std::string, Tensor> o;
  auto both = [&](const std::string& from, const std::string& to) {
    for (const char* s : {".weight", ".bias"})
      if (d.count(from + s)) o[prefix + to + s] = d.at(from + s).values();
  };
  auto fused = [&](const std::vector<std::string>& parts, const std::string& to) {
    for (const char* s : {".weight", ".bias"}) {
      std::vector<Tensor> rows;
      for (const auto& p : parts) rows.push_back(d.at(p + s).values());
      o[prefix + to + s] = cat(rows, 0);
    }
  };
  both("x_embedder", "img_in");
  both("context_embedder", "txt_in");
  both("time_text_embed.timestep_embedder.linear_1", "time_in.in_layer");
  both("time_text_embed.timestep_embedder.linear_2", "time_in.out_layer");
  both("time_text_embed.text_embedder.linear_1", "vector_in.in_layer");
  both("time_text_embed.text_embedder.linear_2", "vector_in.out_layer");
  both("proj_out", "final_layer.linear");
  for (const char* s : {".weight", ".bias"}) {
    Tensor t = d.at(std::string("norm_out.linear") + s).values();
    int64_t half = t.size(0) / 2;
    o[prefix + "final_layer.adaLN_modulation.1" + s] = cat({t.narrow(0, half, half), t.narrow(0, 0, half)}, 0);
  }
  std::string b = "transformer_blocks.0.", ob = "double_blocks.0.";
  both(b + "norm1.linear", ob + "img_mod.lin");
  both(b + "norm1_context.linear", ob + "txt_mod.lin");
  fused({b + "attn.to_q", b + "attn.to_k", b + "attn.to_v"}, ob + "img_attn.qkv");
  fused({b + "attn.add_q_proj", b + "attn.add_k_proj", b + "attn.add_v_proj"}, ob + "txt_attn.qkv");
  o[prefix + ob + "img_attn.norm.query_norm.scale"] = d.at(b + "attn.norm_q.weight").values();
  o[prefix + ob + "img_attn.norm.key_norm.scale"] = d.at(b + "attn.norm_k.weight").values();
  o[prefix + ob + "txt_attn.norm.query_norm.scale"] = d.at(b + "attn.norm_added_q.weight").values();
  o[prefix + ob + "txt_attn.norm.key_norm.scale"] = d.at(b + "attn.norm_added_k.weight").values();
  both(b + "attn.to_out.0", ob + "img_attn.proj");
  both(b + "attn.to_add_out", ob + "txt_attn.proj");
  both(b + "ff.net.0.proj", ob + "img_mlp.0");
  both(b + "ff.net.2", ob + "img_mlp.2");
  both(b + "ff_context.net.0.proj", ob + "txt_mlp.0");
  both(b + "ff_context.net.2", ob + "txt_mlp.2");
  std::string s = "single_transformer_blocks.0.", os = "single_blocks.0.";
  fused({s + "attn.to_q", s + "attn.to_k", s + "attn.to_v", s + "proj_mlp"}, os + "linear1");
  both(s + "proj_out", os + "linear2");
  both(s + "norm.linear", os + "modulation.lin");
  o[prefix + os + "norm.query_norm.scale"] = d.at(s + "attn.norm_q.weight").values();
  o[prefix + os + "norm.key_norm.scale"] = d.at(s + "attn.norm_k.weight").values();
  return o;
}

TEST(FluxCheckpoints, OriginalSingleFileLayoutGivesTheSameSample) {
  FluxCheckpoint ck = fixture_checkpoint();
  TempDir dir("flux_original");
  // The tiny model's RoPE axes are not FLUX.1's: the config file supplies them, the rest is inferred.
  io::write_text_atomic(dir.file("axes.json"), R"({"axes_dims_rope": [4, 4, 8]})");
  for (const std::string prefix : {"", "model.diffusion_model."}) {
    std::string file = dir.file("flux1-tiny.safetensors");
    io::save_safetensors(file, to_original_layout(ck.state, prefix));
    FluxCheckpoint original = read_flux_checkpoint(file, dir.file("axes.json"));
    EXPECT_EQ(original.config.num_layers, 1);
    EXPECT_EQ(original.config.attention_head_dim, 16);
    EXPECT_EQ(max_abs_diff(sample_of(original), sample_of(ck)), 0.0) << "prefix '" << prefix << "'";
  }
}

}  // namespace
}  // namespace cpdit::models::flux
