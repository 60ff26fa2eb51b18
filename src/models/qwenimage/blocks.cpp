#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/common/rope.hpp>
#include <cpdit/models/qwenimage/blocks.hpp>

#include <algorithm>

namespace cpdit::models::qwenimage {

using common::Activation;

namespace {
constexpr float kEps = 1e-6f;  // every LayerNorm and q/k RMSNorm of Qwen-Image

// zero_cond_t: a modulation vector (2B, D) — the t half, then the t = 0 half — spread per token
// (B, S, D) by index (B, S): 0 takes the t row of its item, anything else the t = 0 row.
Tensor per_token(const Tensor& vector, const Tensor& index) {
  const int64_t batch = index.size(0), tokens = index.size(1), dim = vector.size(1);
  CPDIT_CHECK(vector.size(0) == 2 * batch, invalid_argument, "Qwen-Image zero_cond_t: the modulation has ",
              vector.size(0), " rows, modulate_index ", index.describe(), " needs 2 x ", batch);
  const Tensor v = vector.contiguous();
  const Tensor i = index.to(DType::i64).contiguous();
  Tensor out = Tensor::empty({batch, tokens, dim}, DType::f32);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < tokens; ++s) {
      const int64_t row = i.data<int64_t>()[b * tokens + s] == 0 ? b : batch + b;
      std::copy_n(v.data<float>() + row * dim, dim, out.data<float>() + (b * tokens + s) * dim);
    }
  return out;
}
}  // namespace

// ---- embeddings -----------------------------------------------------------------------------------

TimestepProjEmbeddings::TimestepProjEmbeddings(int64_t dim)
    : timestep_embedder_(add_module<common::MlpEmbedder>("timestep_embedder", 256, dim, Activation::silu)) {}

Tensor TimestepProjEmbeddings::forward(const Tensor& timestep) const {
  return with_hooks({{"timestep", timestep}}, [&](const nn::TensorMap& in) {
    common::SinusoidOptions options;
    options.scale = 1000.0f;
    return std::vector<Tensor>{
        timestep_embedder_.forward(common::timestep_sinusoid(in.at("timestep").to(DType::f32).reshape({-1}), 256, options))};
  })[0];
}

PosEmbed::PosEmbed(std::array<int64_t, 3> axes_dims) : axes_dims_(axes_dims) {}

std::vector<Tensor> PosEmbed::forward(const Tensor& img_shapes, int64_t text_tokens) const {
  return with_hooks({{"img_shapes", img_shapes}}, [&](const nn::TensorMap& in) {
    const Tensor shapes = in.at("img_shapes").to(DType::i64);
    CPDIT_CHECK(shapes.dim() == 3 && shapes.size(0) > 0 && shapes.size(1) > 0 && shapes.size(2) == 3, invalid_argument,
                "Qwen-Image img_shapes must be I64 (B, K, 3) = (frames, h, w) per image segment, got ",
                in.at("img_shapes").describe());
    const int64_t* v = shapes.data<int64_t>();
    std::vector<common::ImageSegment> segments;
    for (int64_t k = 0; k < shapes.size(1); ++k) segments.push_back({v[3 * k], v[3 * k + 1], v[3 * k + 2]});
    common::PolarRope rope = common::polar_rope(segments, text_tokens, axes_dims_, /*scale_rope=*/true);
    return std::vector<Tensor>{rope.image.cos, rope.image.sin, rope.text.cos, rope.text.sin};
  });
}

// ---- block ----------------------------------------------------------------------------------------

TransformerBlock::TransformerBlock(int64_t dim, int64_t heads, int64_t head_dim)
    : img_mod_(add_module<common::AdaLayerNormZero>("img_mod", dim, 6, "1")),
      txt_mod_(add_module<common::AdaLayerNormZero>("txt_mod", dim, 6, "1")),
      attn_(add_module<common::JointAttention>(
          "attn", common::AttentionShape{dim, heads, head_dim, common::QkNorm::per_head, kEps})),
      img_mlp_(add_module<common::FeedForward>("img_mlp", dim, 4 * dim, Activation::gelu_tanh)),
      txt_mlp_(add_module<common::FeedForward>("txt_mlp", dim, 4 * dim, Activation::gelu_tanh)) {}

std::vector<Tensor> TransformerBlock::forward(const Tensor& hidden_states, const Tensor& encoder_hidden_states,
                                              const Tensor& encoder_hidden_states_mask, const Tensor& temb,
                                              const Tensor& cos, const Tensor& sin,
                                              const Tensor& modulate_index) const {
  nn::TensorMap args{{"hidden_states", hidden_states}, {"encoder_hidden_states", encoder_hidden_states},
                     {"encoder_hidden_states_mask", encoder_hidden_states_mask}, {"temb", temb}, {"cos", cos},
                     {"sin", sin}, {"modulate_index", modulate_index}};
  return with_hooks(std::move(args), [&](const nn::TensorMap& in) {
    const Tensor &x = in.at("hidden_states"), &c = in.at("encoder_hidden_states");
    const Tensor& index = in.at("modulate_index");  // this rank's image tokens, as the plan splits it
    // shift, scale, gate for attention, then for the MLP, per stream.
    auto m = img_mod_.forward(in.at("temb"));
    if (index.defined())
      for (Tensor& v : m) v = per_token(v, index);
    auto mc = txt_mod_.forward(index.defined() ? in.at("temb").narrow(0, 0, index.size(0)) : in.at("temb"));
    // Each residual branch ends in one pass over its output projection's product (bias, gate and
    // residual): new tensors, never the inputs, which hooks may hold.
    auto h = attn_.forward_residual(x, m[2], c, mc[2], common::norm_modulate(x, m[1], m[0], kEps),
                                    common::norm_modulate(c, mc[1], mc[0], kEps), in.at("cos"), in.at("sin"),
                                    in.at("encoder_hidden_states_mask"));
    Tensor x2 = img_mlp_.forward_residual(h[0], m[5], common::norm_modulate(h[0], m[4], m[3], kEps));
    Tensor c2 = txt_mlp_.forward_residual(h[1], mc[5], common::norm_modulate(h[1], mc[4], mc[3], kEps));
    return std::vector<Tensor>{c2, x2};
  });
}

}  // namespace cpdit::models::qwenimage
