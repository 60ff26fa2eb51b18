#include <cpdit/core/error.hpp>
#include <cpdit/nn/config_inference.hpp>
#include <cpdit/models/common/wan_config.hpp>

#include <algorithm>

#include <utility>

namespace cpdit::models::common::wan {

std::vector<nn::ConfigField> WanConfig::fields() {
  return with_shared({{"patch_size", patch_size}, {"text_dim", text_dim}, {"freq_dim", freq_dim},
                      {"ffn_dim", ffn_dim}, {"cross_attn_norm", cross_attn_norm}, {"qk_norm", qk_norm},
                      {"eps", eps}, {"rope_max_seq_len", rope_max_seq_len}, {"image_dim", image_dim},
                      {"added_kv_proj_dim", added_kv_proj_dim}, {"pos_embed_seq_len", pos_embed_seq_len}});
}

WanConfig WanConfig::from_json(const nlohmann::json& j, WanConfig base) {
  return common::read_family_config(j, std::move(base), "Wan");
}

WanConfig WanConfig::infer(const nn::StateDict& state) {
  WanConfig c;
  const nn::WeightShapes shape(state, "diffusers WanTransformer3DModel");
  const Shape& patch = shape("patch_embedding.weight");  // [D, C_in, pt, ph, pw]
  CPDIT_CHECK(patch.size() == 5, invalid_argument, "Wan patch_embedding.weight must be 5-D, got ", shape_string(patch));
  const int64_t dim = patch[0];
  c.in_channels = patch[1];
  c.patch_size = {patch[2], patch[3], patch[4]};
  c.num_attention_heads = dim / c.attention_head_dim;  // 0 for widths below 128: config.json must say
  c.freq_dim = shape("condition_embedder.time_embedder.linear_1.weight")[1];
  c.text_dim = shape("condition_embedder.text_embedder.linear_1.weight")[1];
  c.num_layers = nn::count_blocks(state, "blocks");
  if (c.num_layers > 0) {
    c.ffn_dim = shape("blocks.0.ffn.net.0.proj.weight")[0];
    c.cross_attn_norm = state.count("blocks.0.norm2.weight") > 0;
  }
  c.out_channels = shape("proj_out.weight")[0] / c.patch_volume();
  // Image conditioning: the image embedder's first norm spans image_dim, add_k_proj takes added_kv_proj_dim.
  if (state.count("condition_embedder.image_embedder.norm1.weight"))
    c.image_dim = shape("condition_embedder.image_embedder.norm1.weight")[0];
  if (state.count("condition_embedder.image_embedder.pos_embed"))
    c.pos_embed_seq_len = shape("condition_embedder.image_embedder.pos_embed")[1];
  if (c.num_layers > 0 && state.count("blocks.0.attn2.add_k_proj.weight"))
    c.added_kv_proj_dim = shape("blocks.0.attn2.add_k_proj.weight")[1];
  return c;
}

void WanConfig::validate() const {
  validate_shared("Wan");
  nn::require_positive("Wan", {{"every patch_size entry", std::min({patch_size[0], patch_size[1], patch_size[2]})},
                               {"out_channels", out_channels}, {"text_dim", text_dim}, {"ffn_dim", ffn_dim},
                               {"rope_max_seq_len", rope_max_seq_len}});
  CPDIT_CHECK(freq_dim > 0 && freq_dim % 2 == 0, invalid_argument,
              "Wan config: freq_dim must be even and positive, got ", freq_dim);
  CPDIT_CHECK(attention_head_dim % 2 == 0 && attention_head_dim >= 6, invalid_argument,
              "Wan config: attention_head_dim must be even and at least 6 (3-axis RoPE), got ", attention_head_dim);
  CPDIT_CHECK(qk_norm == "rms_norm_across_heads", invalid_argument, "Wan config: qk_norm '", qk_norm,
              "' is not supported (only \"rms_norm_across_heads\", as every released Wan checkpoint uses)");
  CPDIT_CHECK(image_dim >= 0 && (image_dim > 0) == (added_kv_proj_dim > 0), invalid_argument,
              "Wan config: image_dim (", image_dim, ") and added_kv_proj_dim (", added_kv_proj_dim,
              ") go together: both set (image-to-video) or both null");
  CPDIT_CHECK(added_kv_proj_dim == 0 || added_kv_proj_dim == inner_dim(), invalid_argument,
              "Wan config: added_kv_proj_dim must be the model width ", inner_dim(),
              " (add_k_proj takes the image embedder's output), got ", added_kv_proj_dim);
  CPDIT_CHECK(pos_embed_seq_len == 0 || (image_dim > 0 && pos_embed_seq_len > 0 && pos_embed_seq_len % 2 == 0),
              invalid_argument, "Wan config: pos_embed_seq_len (", pos_embed_seq_len,
              ") is the image tokens of a first and a last frame: even, and only with image_dim");
}

}  // namespace cpdit::models::common::wan
