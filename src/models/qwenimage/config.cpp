#include <cpdit/core/error.hpp>
#include <cpdit/models/qwenimage/config.hpp>
#include <cpdit/nn/config_inference.hpp>

#include <utility>

namespace cpdit::models::qwenimage {

std::vector<nn::ConfigField> QwenImageConfig::fields() {
  return with_shared({{"patch_size", patch_size}, {"joint_attention_dim", joint_attention_dim},
                      {"axes_dims_rope", axes_dims_rope}, {"guidance_embeds", guidance_embeds},
                      {"zero_cond_t", zero_cond_t}, {"use_additional_t_cond", use_additional_t_cond},
                      {"use_layer3d_rope", use_layer3d_rope}});
}

QwenImageConfig QwenImageConfig::from_json(const nlohmann::json& j, QwenImageConfig base) {
  return common::read_family_config(j, std::move(base), "Qwen-Image");
}

QwenImageConfig QwenImageConfig::infer(const nn::StateDict& state) {
  QwenImageConfig c;
  const nn::WeightShapes shape(state, "diffusers QwenImageTransformer2DModel");
  const Shape& img_in = shape("img_in.weight");  // [D, in_channels]
  c.in_channels = img_in[1];
  c.joint_attention_dim = shape("txt_in.weight")[1];
  c.num_layers = nn::count_blocks(state, "transformer_blocks");
  if (c.num_layers > 0) c.attention_head_dim = shape("transformer_blocks.0.attn.norm_q.weight")[0];
  c.num_attention_heads = img_in[0] / c.attention_head_dim;
  c.out_channels = shape("proj_out.weight")[0] / (c.patch_size * c.patch_size);
  c.use_additional_t_cond = state.count("time_text_embed.addition_t_embedding.weight") > 0;
  c.guidance_embeds = state.count("time_text_embed.guidance_embedder.linear_1.weight") > 0;
  return c;
}

void QwenImageConfig::validate() const {
  validate_shared("Qwen-Image");
  nn::require_positive("Qwen-Image", {{"patch_size", patch_size}, {"joint_attention_dim", joint_attention_dim}});
  const int64_t axes = axes_dims_rope[0] + axes_dims_rope[1] + axes_dims_rope[2];
  CPDIT_CHECK(axes == attention_head_dim, invalid_argument,
              "Qwen-Image config: axes_dims_rope must sum to attention_head_dim (", attention_head_dim, "), got ",
              axes);
  for (int64_t a : axes_dims_rope)
    CPDIT_CHECK(a > 0 && a % 2 == 0, invalid_argument,
                "Qwen-Image config: every axes_dims_rope width must be even and positive");
  CPDIT_CHECK(!guidance_embeds && !use_additional_t_cond && !use_layer3d_rope, unsupported,
              "Qwen-Image config: guidance_embeds, use_additional_t_cond and use_layer3d_rope are not supported yet "
              "(the text-to-image and edit checkpoints have them all false)");
}

}  // namespace cpdit::models::qwenimage
