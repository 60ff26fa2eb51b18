#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/wan/blocks.hpp>

namespace cpdit::models::wan {

namespace k = kernels;
using common::Activation;

// ---- embeddings -----------------------------------------------------------------------------------

PatchEmbedding::PatchEmbedding(int64_t in_channels, int64_t dim, std::array<int64_t, 3> patch_size)
    : weight_(add_parameter("weight", {dim, in_channels, patch_size[0], patch_size[1], patch_size[2]})),
      bias_(add_parameter("bias", {dim})),
      patch_size_(patch_size) {}

Tensor PatchEmbedding::forward(const Tensor& input) const {
  return with_hooks({{"input", input}}, [&](const nn::TensorMap& in) {
    return std::vector<Tensor>{k::patch_embed(in.at("input"), weight_.value, bias_.value.values("patch embedding"), patch_size_)};
  })[0];
}

ConditionEmbedder::ConditionEmbedder(int64_t dim, int64_t freq_dim, int64_t text_dim)
    : freq_dim_(freq_dim),
      time_embedder_(add_module<common::MlpEmbedder>("time_embedder", freq_dim, dim, Activation::silu)),
      time_proj_(add_module<nn::Linear>("time_proj", dim, 6 * dim)),
      text_embedder_(add_module<common::MlpEmbedder>("text_embedder", text_dim, dim, Activation::gelu_tanh)) {}

std::vector<Tensor> ConditionEmbedder::forward(const Tensor& timestep, const Tensor& encoder_hidden_states) const {
  return with_hooks({{"timestep", timestep}, {"encoder_hidden_states", encoder_hidden_states}},
                    [&](const nn::TensorMap& in) {
                      const Tensor t = in.at("timestep").to(DType::f32);
                      CPDIT_CHECK(t.dim() == 1 || t.dim() == 2, invalid_argument,
                                  "Wan timestep must be (B,) or per token (B, S), got ", t.describe());
                      // The raw timestep (0..1000) goes into the sinusoid: no scaling (unlike FLUX.1).
                      Tensor temb = time_embedder_.forward(common::timestep_sinusoid(t.reshape({-1}), freq_dim_));
                      Tensor proj = time_proj_.forward(k::silu(temb));
                      if (t.dim() == 2) {
                        temb = temb.reshape({t.size(0), t.size(1), -1});
                        proj = proj.reshape({t.size(0), t.size(1), -1});
                      }
                      return std::vector<Tensor>{temb, proj, text_embedder_.forward(in.at("encoder_hidden_states"))};
                    });
}

// ---- block ----------------------------------------------------------------------------------------

Block::Block(int64_t dim, int64_t heads, int64_t head_dim, int64_t ffn_dim, bool cross_attn_norm, float eps)
    : eps_(eps),
      attn1_(add_module<common::Attention>("attn1", common::AttentionShape{dim, heads, head_dim,
                                                                           common::QkNorm::across_heads, eps})),
      attn2_(add_module<common::Attention>("attn2", common::AttentionShape{dim, heads, head_dim,
                                                                           common::QkNorm::across_heads, eps})),
      norm2_(cross_attn_norm ? &add_module<nn::LayerNorm>("norm2", dim, eps, /*affine=*/true) : nullptr),
      ffn_(add_module<common::FeedForward>("ffn", dim, ffn_dim, Activation::gelu_tanh)),
      scale_shift_table_(add_parameter("scale_shift_table", {1, 6, dim})) {}

Tensor Block::forward(const Tensor& hidden_states, const Tensor& encoder_hidden_states, const Tensor& temb,
                      const Tensor& rotary_cos, const Tensor& rotary_sin) const {
  nn::TensorMap args{{"hidden_states", hidden_states}, {"encoder_hidden_states", encoder_hidden_states},
                     {"temb", temb}, {"rotary_cos", rotary_cos}, {"rotary_sin", rotary_sin}};
  return with_hooks(std::move(args), [&](const nn::TensorMap& in) {
    const Tensor& x = in.at("hidden_states");
    // shift, scale, gate (self-attention), c_shift, c_scale, c_gate (feed-forward)
    auto m = common::scale_shift_modulation(scale_shift_table_.value, in.at("temb"));
    Tensor a = attn1_.forward(common::norm_modulate(x, m[1], m[0], eps_), {}, in.at("rotary_cos"), in.at("rotary_sin"));
    Tensor h = common::gated_residual(x, a, m[2]);  // never write into the input, which a hook may hold
    k::add_(h, attn2_.forward(norm2_ ? norm2_->forward(h) : h, in.at("encoder_hidden_states"), {}, {}));
    common::add_gated_(h, ffn_.forward(common::norm_modulate(h, m[4], m[3], eps_)), m[5]);
    return std::vector<Tensor>{h};
  })[0];
}

}  // namespace cpdit::models::wan
