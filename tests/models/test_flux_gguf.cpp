// FLUX.1 from GGUF files in the original (BFL) layout, as ComfyUI-GGUF writes them
// (tests/data/fixtures/gguf, made by tools/reference/gguf_fixtures.py): the blocks are bound as they
// are mapped, Linear computes from them, and the sample is diffusers' own on the decoded weights.
#include "models/flux_fixture.hpp"
#include "support/forward_cli.hpp"
#include "support/relative_error.hpp"

#include <cpdit/core/error.hpp>

#include <gtest/gtest.h>

#include <regex>

namespace cpdit::models::flux {
namespace {

using testing::fixture_dir;
using testing::fixture_inputs;

using cpdit::testing::parameters_in_format;
using cpdit::testing::relative_to_range;

std::string gguf_dir() { return cpdit::testing::fixture_dir("gguf") + "/"; }

TEST(FluxGguf, Q8_0GivesDiffusersSampleOnTheDecodedWeights) {
  auto checkpoint = read_flux_checkpoint(gguf_dir() + "flux_tiny_q8_0.gguf", fixture_dir() + "/config.json");
  auto model = load_flux(checkpoint);
  // qkv, projections, MLPs, modulations: every 2-D weight whose rows are whole 32-blocks
  EXPECT_GE(parameters_in_format(*model, "Q8_0"), 20);
  auto expected = io::load_safetensors(gguf_dir() + "flux_tiny_q8_0_expected.safetensors");
  Tensor sample = model->forward(fixture_inputs()).at("sample");
  // Against diffusers on the same (decoded) weights: only f32 rounding differs, as for the f32 fixture.
  EXPECT_LT(max_abs_diff(sample, expected.at("sample")), 1e-4);
  // Against the f32 model's sample: the quantisation's own effect, which diffusers shows on the same
  // weights (|sample_q8 - sample_f32|, 0.7% of the range), plus the f32 rounding above.
  const double quantisation = max_abs_diff(expected.at("sample"), expected.at("sample_f32"));
  EXPECT_LT(relative_to_range(expected.at("sample"), expected.at("sample_f32")), 0.01);
  EXPECT_LT(max_abs_diff(sample, expected.at("sample_f32")), quantisation + 1e-4);
}

TEST(FluxGguf, Q4_KGivesDiffusersSampleWithTheBuiltInConfig) {
  // No config: FLUX.1-dev's (RoPE axes 16, 56, 56) with the sizes the tensors tell.
  auto checkpoint = read_flux_checkpoint(gguf_dir() + "flux_wide_q4_k.gguf");
  EXPECT_EQ(checkpoint.config.attention_head_dim, 128);
  auto model = load_flux(checkpoint);
  EXPECT_GE(parameters_in_format(*model, "Q4_K"), 15);
  auto expected = io::load_safetensors(gguf_dir() + "flux_wide_q4_k_expected.safetensors");
  Tensor sample = model->forward(io::load_safetensors(gguf_dir() + "flux_wide_q4_k_inputs.safetensors")).at("sample");
  // f32 sums over up to 1280 products per output, through 2 blocks: 1e-5 of the output's range.
  EXPECT_LT(relative_to_range(sample, expected.at("sample")), 1e-5);
}

TEST(FluxGguf, F32LoadDecodesTheBlocksAndGivesTheSameSample) {
  auto checkpoint = read_flux_checkpoint(gguf_dir() + "flux_tiny_q8_0.gguf", fixture_dir() + "/config.json");
  auto quantised = load_flux(checkpoint);
  auto decoded = load_flux(checkpoint, nn::load_options("f32"));
  EXPECT_EQ(parameters_in_format(*decoded, "Q8_0"), 0);
  // The same values through the same sgemm, tiled differently: f32 rounding only.
  EXPECT_LT(
      max_abs_diff(quantised->forward(fixture_inputs()).at("sample"), decoded->forward(fixture_inputs()).at("sample")),
      1e-5);
}

TEST(FluxGguf, CliForwardAndInspect) {
  const std::string gguf = gguf_dir() + "flux_wide_q4_k.gguf";
  const Tensor expected = io::load_safetensors(gguf_dir() + "flux_wide_q4_k_expected.safetensors").at("sample");
  cpdit::testing::expect_forward_cli_runs("--model " + gguf, gguf_dir() + "flux_wide_q4_k_inputs.safetensors",
                                          {"", " --ring 2", " --ulysses 2"}, expected, relative_to_range, 1e-5);
  auto listed = cpdit::testing::run_cli("inspect " + gguf);
  ASSERT_EQ(listed.code, 0) << listed.err;
  EXPECT_NE(listed.out.find("class: FluxTransformer2DModel (from tensor names)"), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find("general.architecture = flux"), std::string::npos) << listed.out;
  // FLUX.1-dev's config sized by the tensors: 2 heads of 128, the RoPE axes of FLUX.1-dev
  EXPECT_TRUE(std::regex_search(listed.out, std::regex(R"(config \(from the tensor shapes\): )"
                                                       R"(\{"attention_head_dim":128,"axes_dims_rope":\[16,56,56\],)"
                                                       R"(.*"num_attention_heads":2,)")))
      << listed.out;
  // Columns padded to the widest entry: name, ggml type, shape, bytes (3 x 256 rows of one 144-byte Q4_K block).
  EXPECT_TRUE(std::regex_search(listed.out,
                                std::regex(R"(double_blocks\.0\.img_attn\.qkv\.weight +Q4_K +\(768, 256\) +110592)")))
      << listed.out;
}

}  // namespace
}  // namespace cpdit::models::flux
