#include <cpdit/core/error.hpp>
#include <cpdit/models/ltx_video/config.hpp>
#include <cpdit/nn/config_inference.hpp>

#include <utility>

namespace cpdit::models::ltx_video {

std::vector<nn::ConfigField> LtxVideoConfig::fields() {
  return with_shared({{"patch_size", patch_size}, {"patch_size_t", patch_size_t},
                      {"cross_attention_dim", cross_attention_dim}, {"caption_channels", caption_channels},
                      {"norm_eps", norm_eps}, {"activation_fn", activation_fn}, {"qk_norm", qk_norm},
                      {"norm_elementwise_affine", norm_elementwise_affine},
                      {"attention_bias", attention_bias}, {"attention_out_bias", attention_out_bias}});
}

LtxVideoConfig LtxVideoConfig::from_json(const nlohmann::json& j, LtxVideoConfig base) {
  return common::read_family_config(j, std::move(base), "LTX-Video");
}

LtxVideoConfig LtxVideoConfig::infer(const nn::StateDict& state) {
  LtxVideoConfig c;
  const nn::WeightShapes shape(state, "diffusers LTXVideoTransformer3DModel");
  const Shape& proj_in = shape("proj_in.weight");  // [D, in_channels]
  c.in_channels = proj_in[1];
  c.num_attention_heads = proj_in[0] / c.attention_head_dim;
  c.out_channels = shape("proj_out.weight")[0];
  c.caption_channels = shape("caption_projection.linear_1.weight")[1];
  c.num_layers = nn::count_blocks(state, "transformer_blocks");
  c.cross_attention_dim = c.num_layers > 0 ? shape("transformer_blocks.0.attn2.to_k.weight")[1] : proj_in[0];
  return c;
}

void LtxVideoConfig::validate() const {
  validate_shared("LTX-Video");
  nn::require_positive("LTX-Video", {{"patch_size", patch_size}, {"patch_size_t", patch_size_t},
                                     {"caption_channels", caption_channels}});
  // The caption projection makes text of the inner width, which attn2's keys read.
  CPDIT_CHECK(cross_attention_dim == inner_dim(), invalid_argument, "LTX-Video config: cross_attention_dim (",
              cross_attention_dim, ") must equal num_attention_heads x attention_head_dim (", inner_dim(), ")");
  // RoPE covers the inner width with 3 axes x at least 2 frequencies x a (cos, sin) pair.
  CPDIT_CHECK(inner_dim() >= 12, invalid_argument, "LTX-Video config: the inner width (", inner_dim(),
              ") must be at least 12 for the 3-axis RoPE");
  CPDIT_CHECK(norm_eps > 0, invalid_argument, "LTX-Video config: norm_eps must be positive");
  CPDIT_CHECK(activation_fn == "gelu-approximate" && qk_norm == "rms_norm_across_heads" && !norm_elementwise_affine &&
                  attention_bias && attention_out_bias,
              unsupported, "LTX-Video config: only activation_fn \"gelu-approximate\", qk_norm \"rms_norm_across_heads\", "
              "norm_elementwise_affine false and attention biases on are supported (every released checkpoint)");
}

}  // namespace cpdit::models::ltx_video
