#include <cpdit/core/error.hpp>
#include <cpdit/nn/config_inference.hpp>
#include <cpdit/models/flux/config.hpp>

#include <numeric>
#include <string>

#include <utility>

namespace cpdit::models::flux {

std::vector<nn::ConfigField> FluxConfig::fields() {
  return with_shared({{"patch_size", patch_size}, {"num_single_layers", num_single_layers},
                      {"joint_attention_dim", joint_attention_dim}, {"pooled_projection_dim", pooled_projection_dim},
                      {"guidance_embeds", guidance_embeds}, {"axes_dims_rope", axes_dims_rope}});
}

FluxConfig FluxConfig::from_json(const nlohmann::json& j, FluxConfig base) {
  return common::read_family_config(j, std::move(base), "FLUX");
}

FluxConfig FluxConfig::infer(const nn::StateDict& state) {
  FluxConfig c;
  const nn::WeightShapes shape(state, "FLUX.1 transformer");
  const Shape& x_embedder = shape("x_embedder.weight");
  c.in_channels = x_embedder[1];
  c.joint_attention_dim = shape("context_embedder.weight")[1];
  c.pooled_projection_dim = shape("time_text_embed.text_embedder.linear_1.weight")[1];
  c.guidance_embeds = state.count("time_text_embed.guidance_embedder.linear_1.weight") > 0;
  c.num_layers = nn::count_blocks(state, "transformer_blocks");
  c.num_single_layers = nn::count_blocks(state, "single_transformer_blocks");
  std::string qk_norm = c.num_layers > 0 ? "transformer_blocks.0.attn.norm_q.weight"
                                         : "single_transformer_blocks.0.attn.norm_q.weight";
  c.attention_head_dim = shape(qk_norm)[0];
  c.num_attention_heads = x_embedder[0] / c.attention_head_dim;
  c.out_channels = shape("proj_out.weight")[0];
  return c;
}

void FluxConfig::validate() const {
  validate_shared("FLUX");
  nn::require_positive("FLUX", {{"patch_size", patch_size}, {"joint_attention_dim", joint_attention_dim},
                                {"pooled_projection_dim", pooled_projection_dim}});
  CPDIT_CHECK(num_single_layers >= 0, invalid_argument, "FLUX config: num_single_layers must be >= 0, got ", num_single_layers);
  int64_t axes = std::accumulate(axes_dims_rope.begin(), axes_dims_rope.end(), int64_t{0});
  CPDIT_CHECK(axes_dims_rope.size() == 3 && axes == attention_head_dim, invalid_argument,
              "FLUX config: axes_dims_rope must be 3 widths summing to attention_head_dim (", attention_head_dim,
              "), got ", axes_dims_rope.size(), " summing to ", axes, " (pass --config with the right axes_dims_rope)");
  for (int64_t a : axes_dims_rope)
    CPDIT_CHECK(a > 0 && a % 2 == 0, invalid_argument, "FLUX config: every axes_dims_rope width must be even and positive");
}

}  // namespace cpdit::models::flux
