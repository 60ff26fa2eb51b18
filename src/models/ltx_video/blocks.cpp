#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/common/adaptive_norm.hpp>
#include <cpdit/models/ltx_video/blocks.hpp>

namespace cpdit::models::ltx_video {

// ---- RoPE -----------------------------------------------------------------------------------------

RotaryPosEmbed::RotaryPosEmbed(int64_t dim, int64_t patch_size, int64_t patch_size_t) : dim_(dim) {
  options_.patch = {patch_size_t, patch_size, patch_size};  // diffusers' bases 20, 2048, 2048 are the defaults
}

std::vector<Tensor> RotaryPosEmbed::forward(std::array<int64_t, 3> grid,
                                            const std::optional<std::array<double, 3>>& scale) const {
  return with_hooks({}, [&](const nn::TensorMap&) {
    common::FractionalRope options = options_;
    options.interpolation_scale = scale;
    common::RopeTables t = common::fractional_rope(dim_, grid, options);
    const int64_t tokens = t.cos.size(0);
    return std::vector<Tensor>{t.cos.reshape({1, tokens, dim_}), t.sin.reshape({1, tokens, dim_})};
  });
}

// ---- block ----------------------------------------------------------------------------------------

namespace {
// LTXAttention's q/k RMSNorm has its own eps, whatever the config's norm_eps (that of norm1/norm2).
constexpr float kQkNormEps = 1e-5f;

common::AttentionShape attention_shape(int64_t dim, int64_t heads, int64_t head_dim) {
  common::AttentionShape shape{dim, heads, head_dim, common::QkNorm::across_heads, kQkNormEps};
  shape.text_keys = attention::KvPlacement::sharded;  // the plan splits the text with the tokens
  return shape;
}
}  // namespace

TransformerBlock::TransformerBlock(int64_t dim, int64_t heads, int64_t head_dim, float eps)
    : attn1_(add_module<common::Attention>("attn1", attention_shape(dim, heads, head_dim))),
      attn2_(add_module<common::Attention>("attn2", attention_shape(dim, heads, head_dim))),
      ff_(add_module<common::FeedForward>("ff", dim, 4 * dim, common::Activation::gelu_tanh)),
      scale_shift_table_(add_parameter("scale_shift_table", {6, dim})),
      eps_(eps) {}

Tensor TransformerBlock::forward(const Tensor& hidden_states, const Tensor& encoder_hidden_states, const Tensor& temb,
                                 const Tensor& cos, const Tensor& sin, const Tensor& encoder_attention_mask) const {
  nn::TensorMap args{{"hidden_states", hidden_states}, {"encoder_hidden_states", encoder_hidden_states},
                     {"temb", temb}, {"cos", cos}, {"sin", sin}, {"encoder_attention_mask", encoder_attention_mask}};
  return with_hooks(std::move(args), [&](const nn::TensorMap& in) {
    const Tensor& x = in.at("hidden_states");
    // shift, scale, gate for attention, then for the FFN: each (B, 1, D), or (B, S, D) per token.
    auto m = common::scale_shift_modulation(scale_shift_table_.value, in.at("temb"));
    const Tensor& c = in.at("cos");
    const int64_t tokens = c.size(1), width = c.size(2);
    // Each branch ends in its residual: a new tensor each time, never written into the inputs (hooks may hold them).
    Tensor y = attn1_.forward_residual(x, m[2], kernels::rms_norm_modulate(x, m[1], m[0], eps_), {},
                                       c.reshape({tokens, width}), in.at("sin").reshape({tokens, width}));
    y = attn2_.forward_residual(y, {}, y, in.at("encoder_hidden_states"), {}, {}, in.at("encoder_attention_mask"));
    return std::vector<Tensor>{ff_.forward_residual(y, m[5], kernels::rms_norm_modulate(y, m[4], m[3], eps_))};
  })[0];
}

}  // namespace cpdit::models::ltx_video
