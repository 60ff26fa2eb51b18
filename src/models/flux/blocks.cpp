#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/flux/blocks.hpp>

namespace cpdit::models::flux {

namespace k = kernels;
using common::Activation;

namespace {
constexpr float kEps = 1e-6f;  // every LayerNorm and q/k RMSNorm of FLUX.1

common::AttentionShape attention_shape(int64_t dim, int64_t heads, int64_t head_dim, bool output_projection) {
  return {dim, heads, head_dim, common::QkNorm::per_head, kEps, output_projection};
}
}  // namespace

// ---- embeddings -----------------------------------------------------------------------------------

TimeTextEmbed::TimeTextEmbed(int64_t dim, int64_t pooled_dim, bool guidance)
    : timestep_embedder_(add_module<common::MlpEmbedder>("timestep_embedder", 256, dim, Activation::silu)),
      guidance_embedder_(guidance ? &add_module<common::MlpEmbedder>("guidance_embedder", 256, dim, Activation::silu)
                                  : nullptr),
      text_embedder_(add_module<common::MlpEmbedder>("text_embedder", pooled_dim, dim, Activation::silu)) {}

Tensor TimeTextEmbed::forward(const Tensor& timestep, const Tensor& guidance, const Tensor& pooled) const {
  return with_hooks({{"timestep", timestep}, {"guidance", guidance}, {"pooled_projection", pooled}},
                    [&](const nn::TensorMap& in) {
                      Tensor temb = timestep_embedder_.forward(common::timestep_sinusoid(in.at("timestep"), 256));
                      if (guidance_embedder_) {
                        CPDIT_CHECK(in.at("guidance").defined(), invalid_argument,
                                    "this FLUX model has a guidance embedder: pass `guidance` (e.g. 3.5)");
                        k::add_(temb, guidance_embedder_->forward(common::timestep_sinusoid(in.at("guidance"), 256)));
                      }
                      k::add_(temb, text_embedder_.forward(in.at("pooled_projection")));
                      return std::vector<Tensor>{temb};
                    })[0];
}

PosEmbed::PosEmbed(std::vector<int64_t> axes_dims) : axes_dims_(std::move(axes_dims)) {}

std::vector<Tensor> PosEmbed::forward(const Tensor& ids) const {
  return with_hooks({{"ids", ids}}, [&](const nn::TensorMap& in) {
    common::RopeTables t = common::rope_from_ids(in.at("ids"), axes_dims_);
    return std::vector<Tensor>{t.cos, t.sin};
  });
}

// ---- blocks ---------------------------------------------------------------------------------------

DoubleBlock::DoubleBlock(int64_t dim, int64_t heads, int64_t head_dim)
    : norm1_(add_module<common::AdaLayerNormZero>("norm1", dim, 6)),
      norm1_context_(add_module<common::AdaLayerNormZero>("norm1_context", dim, 6)),
      attn_(add_module<common::JointAttention>("attn", attention_shape(dim, heads, head_dim, true))),
      ff_(add_module<common::FeedForward>("ff", dim, 4 * dim, Activation::gelu_tanh)),
      ff_context_(add_module<common::FeedForward>("ff_context", dim, 4 * dim, Activation::gelu_tanh)) {}

std::vector<Tensor> DoubleBlock::forward(const Tensor& hidden_states, const Tensor& encoder_hidden_states,
                                         const Tensor& temb, const Tensor& cos, const Tensor& sin) const {
  nn::TensorMap args{{"hidden_states", hidden_states}, {"encoder_hidden_states", encoder_hidden_states},
                     {"temb", temb}, {"cos", cos}, {"sin", sin}};
  return with_hooks(std::move(args), [&](const nn::TensorMap& in) {
    const Tensor &x = in.at("hidden_states"), &c = in.at("encoder_hidden_states"), &emb = in.at("temb");
    // shift, scale, gate for attention, then for the MLP.
    auto m = norm1_.forward(emb);
    auto mc = norm1_context_.forward(emb);
    // Each residual branch ends in one pass over its output projection's product (bias, gate and
    // residual): new tensors, never the inputs, which hooks may hold.
    auto h = attn_.forward_residual(x, m[2], c, mc[2], common::norm_modulate(x, m[1], m[0], kEps),
                                    common::norm_modulate(c, mc[1], mc[0], kEps), in.at("cos"), in.at("sin"));
    Tensor x2 = ff_.forward_residual(h[0], m[5], common::norm_modulate(h[0], m[4], m[3], kEps));
    Tensor c2 = ff_context_.forward_residual(h[1], mc[5], common::norm_modulate(h[1], mc[4], mc[3], kEps));
    return std::vector<Tensor>{c2, x2};
  });
}

SingleBlock::SingleBlock(int64_t dim, int64_t heads, int64_t head_dim)
    : norm_(add_module<common::AdaLayerNormZero>("norm", dim, 3)),
      proj_mlp_(add_module<nn::Linear>("proj_mlp", dim, 4 * dim)),
      attn_(add_module<common::Attention>("attn", attention_shape(dim, heads, head_dim, false))),
      proj_out_(add_module<nn::Linear>("proj_out", dim + 4 * dim, dim)) {}

std::vector<Tensor> SingleBlock::forward(const Tensor& hidden_states, const Tensor& encoder_hidden_states,
                                         const Tensor& temb, const Tensor& cos, const Tensor& sin) const {
  nn::TensorMap args{{"hidden_states", hidden_states}, {"encoder_hidden_states", encoder_hidden_states},
                     {"temb", temb}, {"cos", cos}, {"sin", sin}};
  return with_hooks(std::move(args), [&](const nn::TensorMap& in) {
    const Tensor& c = in.at("encoder_hidden_states");
    const int64_t text = c.size(1);
    Tensor h = cat({c, in.at("hidden_states")}, 1);
    auto m = norm_.forward(in.at("temb"));  // shift, scale, gate
    Tensor nh = common::norm_modulate(h, m[1], m[0], kEps);
    Tensor mlp = common::linear_gelu(proj_mlp_, nh, /*tanh_approx=*/true);
    Tensor a = attn_.forward(nh, Tensor(), in.at("cos"), in.at("sin"));
    // proj_out over [a; mlp] (3072 + 12288 features) reads both where they are.
    Tensor out = common::projected_residual(h, proj_out_, {a, mlp}, m[2]);
    return std::vector<Tensor>{out.narrow(1, 0, text), out.narrow(1, text, out.size(1) - text)};
  });
}

}  // namespace cpdit::models::flux
