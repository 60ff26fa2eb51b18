// The shared DiT layers of models/common: the embedders against diffusers' own numbers (the ltx_tiny
// and qwenimage_tiny fixtures hold the outputs of LTX's AdaLayerNormSingle and caption projection and
// of Qwen-Image's scaled timestep embedding), the rest against a float64 reference.
#include "support/model_fixture.hpp"
#include "support/random_normal.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/models/common/adaptive_norm.hpp>
#include <cpdit/models/common/attention.hpp>
#include <cpdit/models/common/feed_forward.hpp>
#include <cpdit/nn/load.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace cpdit::models::common {
namespace {

using cpdit::testing::random_normal;

// The weights of the fixture model's sub-module `prefix`, bound to `module`.
void load_part(nn::Module& module, const std::string& model, const std::string& prefix) {
  nn::StateDict part;
  for (const auto& [name, t] : cpdit::testing::fixture_state_dict(model))
    if (name.rfind(prefix, 0) == 0) part[name.substr(prefix.size())] = t;
  nn::load_state_dict(module, part);
}

// Fixture embeddings: they land within 2.5e-6 (float32 sums over 256 inputs in another order than
// torch's); 1e-5 keeps a margin over that, while a missing ×1000, a swapped sin/cos half or a wrong
// activation moves them by more than 1e-2.
constexpr double kFixtureTolerance = 1e-5;

TEST(CommonEmbeddings, AdaLayerNormSingleMatchesLtx) {
  AdaLayerNormSingle time_embed(24);
  load_part(time_embed, "ltx_tiny", "time_embed.");
  const Tensor timestep = cpdit::testing::fixture_file("ltx_tiny", "inputs").at("timestep");
  auto expected = cpdit::testing::fixture_file("ltx_tiny", "intermediates");
  auto out = time_embed.forward(timestep.reshape({-1}));  // raw 0..1000, no scaling
  ASSERT_EQ(out.size(), 2u);
  EXPECT_LT(max_abs_diff(out[0], expected.at("time_embed.0")), kFixtureTolerance);
  EXPECT_LT(max_abs_diff(out[1], expected.at("time_embed.1")), kFixtureTolerance);
}

TEST(CommonEmbeddings, GeluTanhTextProjectionMatchesLtx) {
  MlpEmbedder caption_projection(12, 24, Activation::gelu_tanh);
  load_part(caption_projection, "ltx_tiny", "caption_projection.");
  const Tensor text = cpdit::testing::fixture_file("ltx_tiny", "inputs").at("encoder_hidden_states");
  const Tensor want = cpdit::testing::fixture_file("ltx_tiny", "intermediates").at("caption_projection");
  EXPECT_LT(max_abs_diff(caption_projection.forward(text), want), kFixtureTolerance);
}

TEST(CommonEmbeddings, ScaledSinusoidMatchesQwenImage) {
  // QwenTimestepProjEmbeddings: Timesteps(256, flip, shift 0, scale 1000), then TimestepEmbedding.
  MlpEmbedder embedder(256, 32, Activation::silu);
  load_part(embedder, "qwenimage_tiny", "time_text_embed.timestep_embedder.");
  const Tensor timestep = cpdit::testing::fixture_file("qwenimage_tiny", "inputs").at("timestep");
  const Tensor want = cpdit::testing::fixture_file("qwenimage_tiny", "intermediates").at("time_text_embed");
  SinusoidOptions scaled;
  scaled.scale = 1000.0f;
  EXPECT_LT(max_abs_diff(embedder.forward(timestep_sinusoid(timestep, 256, scaled)), want), kFixtureTolerance);
  EXPECT_GT(max_abs_diff(embedder.forward(timestep_sinusoid(timestep, 256)), want), 1e-2);  // the scale matters
}

TEST(CommonEmbeddings, SinusoidOrderAndShift) {
  const Tensor t = Tensor::from_vector({3.0f}, {1});
  SinusoidOptions plain;
  plain.flip_sin_to_cos = false;
  plain.downscale_freq_shift = 1.0f;
  const Tensor flipped = timestep_sinusoid(t, 8), unflipped = timestep_sinusoid(t, 8, plain);
  for (int j = 0; j < 4; ++j) {
    EXPECT_NEAR(flipped.data<float>()[j], std::cos(3.0 * std::exp(-std::log(10000.0) * j / 4)), 1e-6);
    EXPECT_NEAR(flipped.data<float>()[4 + j], std::sin(3.0 * std::exp(-std::log(10000.0) * j / 4)), 1e-6);
    // Unflipped: the sin half first.
    EXPECT_NEAR(unflipped.data<float>()[j], std::sin(3.0 * std::exp(-std::log(10000.0) * j / 3)), 1e-6);
    EXPECT_NEAR(unflipped.data<float>()[4 + j], std::cos(3.0 * std::exp(-std::log(10000.0) * j / 3)), 1e-6);
  }
  EXPECT_THROW(timestep_sinusoid(Tensor::zeros({2, 2}), 8), Error);
}

// FeedForward in float64 from the bound weights: net.2(a(net.0.proj x)), gated: hidden · a(gate).
double act(Activation a, double x) {
  if (a == Activation::silu) return x / (1.0 + std::exp(-x));
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));  // exact GELU (GEGLU)
}

void expect_feed_forward_matches_float64(Activation activation, bool gated) {
  const int64_t dim = 6, hidden = 10, tokens = 5;
  FeedForward ff(dim, hidden, activation, gated);
  nn::StateDict weights{{"net.0.proj.weight", random_normal({gated ? 2 * hidden : hidden, dim}, 1, 0.4f)},
                        {"net.0.proj.bias", random_normal({gated ? 2 * hidden : hidden}, 2, 0.1f)},
                        {"net.2.weight", random_normal({dim, hidden}, 3, 0.3f)},
                        {"net.2.bias", random_normal({dim}, 4, 0.1f)}};
  nn::load_state_dict(ff, weights);  // diffusers' key names, or an error
  const Tensor x = random_normal({1, tokens, dim}, 5);
  const Tensor y = ff.forward(x);
  auto w = [&](const char* name, int64_t r, int64_t c) {
    const Tensor& t = weights.at(name).values();
    return double(t.data<float>()[r * t.size(1) + c]);
  };
  for (int64_t s = 0; s < tokens; ++s) {
    std::vector<double> projected(size_t(gated ? 2 * hidden : hidden));
    for (size_t r = 0; r < projected.size(); ++r) {
      projected[r] = weights.at("net.0.proj.bias").values().data<float>()[r];
      for (int64_t c = 0; c < dim; ++c) projected[r] += w("net.0.proj.weight", int64_t(r), c) * x.data<float>()[s * dim + c];
    }
    for (int64_t o = 0; o < dim; ++o) {
      double out = weights.at("net.2.bias").values().data<float>()[o];
      for (int64_t i = 0; i < hidden; ++i) {
        const double h = gated ? projected[size_t(i)] * act(activation, projected[size_t(hidden + i)])
                               : act(activation, projected[size_t(i)]);
        out += w("net.2.weight", o, i) * h;
      }
      // Sums of ten O(1) float32 products: 1e-5 is far above their rounding and far below the
      // error of using the wrong half as the gate.
      EXPECT_NEAR(y.data<float>()[s * dim + o], out, 1e-5);
    }
  }
}

TEST(CommonFeedForward, SwiGLUMatchesFloat64) { expect_feed_forward_matches_float64(Activation::silu, true); }
TEST(CommonFeedForward, GatedGeluMatchesFloat64) { expect_feed_forward_matches_float64(Activation::gelu, true); }
TEST(CommonFeedForward, PlainSiluMatchesFloat64) { expect_feed_forward_matches_float64(Activation::silu, false); }
// Plain GELU runs the product without its bias and finishes bias and GELU in one pass.
TEST(CommonFeedForward, PlainGeluMatchesFloat64) { expect_feed_forward_matches_float64(Activation::gelu, false); }

// Seeded random values for every parameter of `module`.
void bind_random(nn::Module& module, unsigned seed) {
  nn::StateDict weights;
  for (const auto& [name, p] : module.named_parameters()) weights[name] = random_normal(p->shape, seed++, 0.3f);
  nn::load_state_dict(module, weights);
}

// A layer whose sub-modules' work is fused into one pass runs them as modules instead when a hook is
// installed on them (the hooks must see them run), with the same result to rounding.
template <class Run>
void expect_hooks_run_and_agree(nn::Module& layer, const std::vector<std::string>& hooked, Run run) {
  const Tensor fused = run();
  int calls = 0;
  for (const std::string& path : hooked)
    layer.find(path)->add_post_hook("test", [&calls](std::vector<Tensor>&) { ++calls; });
  const Tensor modules = run();
  EXPECT_EQ(calls, int(hooked.size()));
  // The bias lands before (modules) or after (fused) the product's sum: float32 rounding only, far
  // below the O(1) change a lost bias, norm weight or rotation makes.
  EXPECT_LT(max_abs_diff(fused, modules), 1e-5);
  for (const std::string& path : hooked) layer.find(path)->remove_hooks("test");
}

TEST(CommonFeedForward, HookedProjectionRunsAsAModule) {
  FeedForward ff(16, 64, Activation::gelu_tanh);
  bind_random(ff, 10);
  const Tensor x = random_normal({2, 5, 16}, 20);
  expect_hooks_run_and_agree(ff, {"net.0.proj"}, [&] { return ff.forward(x); });
}

// RoPE tables (tokens, width) of seeded angles, each repeated for its pair.
RopeTables random_tables(int64_t tokens, int64_t width, unsigned seed) {
  const Tensor angles = random_normal({tokens, width / 2}, seed);
  std::vector<float> c(size_t(tokens * width)), s(c.size());
  for (int64_t i = 0; i < tokens * width; ++i) {
    c[size_t(i)] = std::cos(angles.data<float>()[i / 2]);
    s[size_t(i)] = std::sin(angles.data<float>()[i / 2]);
  }
  return {Tensor::from_vector(c, {tokens, width}), Tensor::from_vector(s, {tokens, width})};
}

// Norm across heads (Wan, LTX-Video) and per head (FLUX.1, Qwen-Image), with RoPE tables over the
// whole width and per head.
TEST(CommonAttention, FusedQkTailAgreesWithItsModules) {
  const int64_t heads = 4, head_dim = 8, tokens = 6;
  for (QkNorm norm : {QkNorm::across_heads, QkNorm::per_head})
    for (int64_t width : {heads * head_dim, head_dim}) {
      SCOPED_TRACE(std::string(norm == QkNorm::per_head ? "per head" : "across heads") + ", table width " +
                   std::to_string(width));
      Attention attn(AttentionShape{heads * head_dim, heads, head_dim, norm, 1e-5f});
      bind_random(attn, 30);
      const Tensor x = random_normal({1, tokens, heads * head_dim}, 40);
      const RopeTables rope = random_tables(tokens, width, 41);
      expect_hooks_run_and_agree(attn, {"to_q", "norm_q", "to_k", "norm_k"},
                                 [&] { return attn.forward(x, {}, rope.cos, rope.sin, {}); });
    }
}

// Joint attention writes each stream's q, k and v into its rows of the joint buffers: in place for one
// batch, through a copy for two (whose rows of a stream are not contiguous) — batch by batch the same
// numbers. The fused q/k tails agree with their modules, and the residual branches with forward.
TEST(CommonAttention, JointAttentionStreamsAndResidualBranches) {
  const int64_t heads = 2, head_dim = 8, dim = heads * head_dim, image = 5, text = 3;
  JointAttention attn(AttentionShape{dim, heads, head_dim, QkNorm::per_head, 1e-6f});
  bind_random(attn, 90);
  const Tensor x = random_normal({2, image, dim}, 91), c = random_normal({2, text, dim}, 92);
  const RopeTables rope = random_tables(text + image, head_dim, 93);
  const auto both = attn.forward(x, c, rope.cos, rope.sin);
  for (int64_t b = 0; b < 2; ++b) {
    const auto one = attn.forward(x.narrow(0, b, 1).contiguous(), c.narrow(0, b, 1).contiguous(), rope.cos, rope.sin);
    // One batch or two run the same products row by row: float32 rounding of another blocking at most.
    EXPECT_LT(max_abs_diff(one[0], both[0].narrow(0, b, 1)), 1e-5);
    EXPECT_LT(max_abs_diff(one[1], both[1].narrow(0, b, 1)), 1e-5);
  }
  auto image_out = [&](const Tensor& xs, const Tensor& cs) { return attn.forward(xs, cs, rope.cos, rope.sin)[0]; };
  const Tensor x1 = x.narrow(0, 0, 1).contiguous(), c1 = c.narrow(0, 0, 1).contiguous();
  expect_hooks_run_and_agree(attn, {"to_q", "norm_q", "add_k_proj", "norm_added_k"}, [&] { return image_out(x1, c1); });
  const Tensor residual = random_normal({1, image, dim}, 94), context_residual = random_normal({1, text, dim}, 95);
  const Tensor gate = random_normal({1, 1, dim}, 96), context_gate = random_normal({1, 1, dim}, 97);
  const auto modules = attn.forward(x1, c1, rope.cos, rope.sin);
  const auto fused = attn.forward_residual(residual, gate, context_residual, context_gate, x1, c1, rope.cos, rope.sin);
  // The bias lands after the product's sum instead of before it: float32 rounding only.
  EXPECT_LT(max_abs_diff(fused[0], gated_residual(residual, modules[0], gate)), 1e-5);
  EXPECT_LT(max_abs_diff(fused[1], gated_residual(context_residual, modules[1], context_gate)), 1e-5);
  for (const std::string hooked : {"to_add_out", ""})
    expect_hooks_run_and_agree(attn, {hooked}, [&] {
      return attn.forward_residual(residual, gate, context_residual, context_gate, x1, c1, rope.cos, rope.sin)[1];
    });
}

// A branch's output added to the residual by the fused pass (the output projection without its bias,
// then bias, gate and residual at once) equals the residual added to forward's output, gated (B, 1, D)
// and per token (B, S, D), or ungated; a hook on the projection or on the layer runs them as modules.
TEST(CommonAttention, ResidualBranchAgreesWithForward) {
  const int64_t heads = 2, head_dim = 4, dim = heads * head_dim, tokens = 5;
  Attention attn(AttentionShape{dim, heads, head_dim, QkNorm::across_heads, 1e-5f});
  bind_random(attn, 70);
  const Tensor x = random_normal({2, tokens, dim}, 71), residual = random_normal({2, tokens, dim}, 72);
  const Tensor text = random_normal({2, 3, dim}, 73);
  for (const Tensor& gate : {random_normal({2, 1, dim}, 74), random_normal({2, tokens, dim}, 75), Tensor()}) {
    SCOPED_TRACE(gate.defined() ? gate.describe() : "no gate");
    const Tensor modules = gated_residual(residual, attn.forward(x, text, {}, {}), gate);
    // The bias lands after the product's sum instead of before it: float32 rounding only.
    EXPECT_LT(max_abs_diff(attn.forward_residual(residual, gate, x, text, {}, {}), modules), 1e-5);
  }
  const Tensor gate = random_normal({2, 1, dim}, 76);
  expect_hooks_run_and_agree(attn, {"to_out.0"}, [&] { return attn.forward_residual(residual, gate, x, text, {}, {}); });
  expect_hooks_run_and_agree(attn, {""}, [&] { return attn.forward_residual(residual, gate, x, text, {}, {}); });
}

TEST(CommonFeedForward, ResidualBranchAgreesWithForward) {
  FeedForward ff(16, 64, Activation::gelu_tanh);
  bind_random(ff, 80);
  const Tensor x = random_normal({2, 5, 16}, 81), residual = random_normal({2, 5, 16}, 82);
  const Tensor gate = random_normal({2, 1, 16}, 83);
  // The bias lands after the product's sum instead of before it: float32 rounding only.
  EXPECT_LT(max_abs_diff(ff.forward_residual(residual, gate, x), gated_residual(residual, ff.forward(x), gate)), 1e-5);
  expect_hooks_run_and_agree(ff, {"net.2"}, [&] { return ff.forward_residual(residual, gate, x); });
  expect_hooks_run_and_agree(ff, {""}, [&] { return ff.forward_residual(residual, gate, x); });
}

// Text keys after the last one the mask keeps (in any batch) are left out before the key and value
// projections: NaN there never reaches the output, which equals cross-attention to the text cut
// after that key, bit for bit. A hidden key before it (batch 1's keys 2 and 3) is still attended
// under the mask, so it must stay finite.
TEST(CommonAttention, CrossAttentionLeavesOutTrailingPadding) {
  const int64_t heads = 2, head_dim = 4, dim = heads * head_dim, tokens = 3, length = 7, kept = 5;
  AttentionShape shape{dim, heads, head_dim, QkNorm::across_heads, 1e-5f};
  Attention attn(shape);
  bind_random(attn, 50);
  const Tensor x = random_normal({2, tokens, dim}, 60);
  Tensor text = random_normal({2, length, dim}, 61);
  const std::vector<uint8_t> keep_values{1, 1, 1, 1, 0, 0, 0,   // batch 0: a prefix of 4
                                         1, 1, 0, 0, 1, 0, 0};  // batch 1: last kept key 4
  Tensor keep = Tensor::empty({2, length}, DType::boolean);
  for (int64_t i = 0; i < 2 * length; ++i) keep.data<bool>()[i] = keep_values[size_t(i)] != 0;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t j = kept; j < length; ++j)
      for (int64_t e = 0; e < dim; ++e) text.data<float>()[(b * length + j) * dim + e] = std::nanf("");
  const Tensor full = attn.forward(x, text, {}, {}, keep);
  const Tensor cut = attn.forward(x, text.narrow(1, 0, kept).contiguous(), {}, {}, keep.narrow(1, 0, kept).contiguous());
  EXPECT_EQ(max_abs_diff(full, cut), 0.0);
  EXPECT_TRUE(std::isfinite(max_abs_diff(full, Tensor::zeros(full.shape()))));
}

TEST(CommonModulation, ScaleShiftTableAddsEachRowInOrder) {
  const int64_t n = 3, dim = 4, tokens = 2;
  const Tensor table = random_normal({n, dim}, 7);
  const Tensor per_batch = random_normal({1, n, dim}, 8), per_token = random_normal({1, tokens, n, dim}, 9);
  auto a = scale_shift_modulation(table, per_batch);
  auto b = scale_shift_modulation(table.reshape({1, n, dim}), per_batch);  // Wan's [1, n, D] table
  auto c = scale_shift_modulation(table, per_token);
  ASSERT_EQ(a.size(), size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(a[size_t(i)].shape(), (Shape{1, 1, dim}));
    ASSERT_EQ(c[size_t(i)].shape(), (Shape{1, tokens, dim}));
    EXPECT_EQ(max_abs_diff(a[size_t(i)], b[size_t(i)]), 0.0);
    for (int64_t d = 0; d < dim; ++d) {
      EXPECT_EQ(a[size_t(i)].contiguous().data<float>()[d], table.data<float>()[i * dim + d] + per_batch.data<float>()[i * dim + d]);
      for (int64_t s = 0; s < tokens; ++s)
        EXPECT_EQ(c[size_t(i)].contiguous().data<float>()[s * dim + d],
                  table.data<float>()[i * dim + d] + per_token.data<float>()[(s * n + i) * dim + d]);
    }
  }
  EXPECT_THROW(scale_shift_modulation(table, random_normal({1, 2, dim}, 10)), Error);
}

TEST(CommonModulation, ContinuousNormTakesScaleBeforeShift) {
  const int64_t dim = 4;
  AdaLayerNormContinuous norm(dim, dim, 1e-6f);
  // linear = 0 weights, bias = [scale rows | shift rows]: the output is LN(x)(1 + scale) + shift.
  std::vector<float> bias{1, 1, 1, 1, 5, 5, 5, 5};
  nn::load_state_dict(norm, {{"linear.weight", Tensor::zeros({2 * dim, dim})}, {"linear.bias", Tensor::from_vector(bias, {2 * dim})}});
  const Tensor x = Tensor::from_vector({1, 2, 3, 4}, {1, 1, dim});
  const Tensor y = norm.forward(x, Tensor::zeros({1, dim}));
  const double sd = std::sqrt(1.25 + 1e-6);
  for (int d = 0; d < dim; ++d) EXPECT_NEAR(y.data<float>()[d], (d + 1 - 2.5) / sd * 2.0 + 5.0, 1e-5);
}

}  // namespace
}  // namespace cpdit::models::common
