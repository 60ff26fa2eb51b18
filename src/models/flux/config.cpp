#include <cpdit/core/error.hpp>
#include <cpdit/models/flux/config.hpp>

#include <numeric>
#include <string>

namespace cpdit::models::flux {

namespace {
template <class T>
void read(const nlohmann::json& j, const char* key, T& field) {
  if (j.contains(key) && !j[key].is_null()) field = j[key].get<T>();
}

const Shape& shape_of(const nn::StateDict& state, const std::string& name) {
  auto it = state.find(name);
  CPDIT_CHECK(it != state.end(), invalid_argument, "cannot infer the FLUX config: the weights have no '", name,
              "' (is this a FLUX.1 transformer checkpoint?)");
  return it->second.shape();
}

// 1 + the largest i of "<prefix>.i." keys; 0 when there are none.
int64_t count_blocks(const nn::StateDict& state, const std::string& prefix) {
  int64_t count = 0;
  for (const auto& [name, t] : state) {
    if (name.rfind(prefix + ".", 0) != 0) continue;
    size_t start = prefix.size() + 1, end = name.find('.', start);
    count = std::max<int64_t>(count, std::stoll(name.substr(start, end - start)) + 1);
  }
  return count;
}
}  // namespace

FluxConfig FluxConfig::from_json(const nlohmann::json& j, FluxConfig c) {
  CPDIT_CHECK(j.is_object(), invalid_argument, "a FLUX config must be a JSON object");
  try {
    read(j, "patch_size", c.patch_size);
    read(j, "in_channels", c.in_channels);
    read(j, "out_channels", c.out_channels);
    read(j, "num_layers", c.num_layers);
    read(j, "num_single_layers", c.num_single_layers);
    read(j, "attention_head_dim", c.attention_head_dim);
    read(j, "num_attention_heads", c.num_attention_heads);
    read(j, "joint_attention_dim", c.joint_attention_dim);
    read(j, "pooled_projection_dim", c.pooled_projection_dim);
    read(j, "guidance_embeds", c.guidance_embeds);
    read(j, "axes_dims_rope", c.axes_dims_rope);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::invalid_argument, "FLUX config has a field of the wrong type: ", e.what());
  }
  return c;
}

FluxConfig FluxConfig::infer(const nn::StateDict& state) {
  FluxConfig c;
  const Shape& x_embedder = shape_of(state, "x_embedder.weight");
  c.in_channels = x_embedder[1];
  c.joint_attention_dim = shape_of(state, "context_embedder.weight")[1];
  c.pooled_projection_dim = shape_of(state, "time_text_embed.text_embedder.linear_1.weight")[1];
  c.guidance_embeds = state.count("time_text_embed.guidance_embedder.linear_1.weight") > 0;
  c.num_layers = count_blocks(state, "transformer_blocks");
  c.num_single_layers = count_blocks(state, "single_transformer_blocks");
  std::string qk_norm = c.num_layers > 0 ? "transformer_blocks.0.attn.norm_q.weight"
                                         : "single_transformer_blocks.0.attn.norm_q.weight";
  c.attention_head_dim = shape_of(state, qk_norm)[0];
  c.num_attention_heads = x_embedder[0] / c.attention_head_dim;
  c.out_channels = shape_of(state, "proj_out.weight")[0];
  return c;
}

void FluxConfig::validate() const {
  auto positive = [](int64_t v, const char* name) {
    CPDIT_CHECK(v > 0, invalid_argument, "FLUX config: ", name, " must be positive, got ", v);
  };
  positive(patch_size, "patch_size");
  positive(in_channels, "in_channels");
  positive(attention_head_dim, "attention_head_dim");
  positive(num_attention_heads, "num_attention_heads");
  positive(joint_attention_dim, "joint_attention_dim");
  positive(pooled_projection_dim, "pooled_projection_dim");
  CPDIT_CHECK(num_layers >= 0 && num_single_layers >= 0, invalid_argument, "FLUX config: block counts must be >= 0");
  int64_t axes = std::accumulate(axes_dims_rope.begin(), axes_dims_rope.end(), int64_t{0});
  CPDIT_CHECK(axes_dims_rope.size() == 3 && axes == attention_head_dim, invalid_argument,
              "FLUX config: axes_dims_rope must be 3 widths summing to attention_head_dim (", attention_head_dim,
              "), got ", axes_dims_rope.size(), " summing to ", axes, " (pass --config with the right axes_dims_rope)");
  for (int64_t a : axes_dims_rope)
    CPDIT_CHECK(a > 0 && a % 2 == 0, invalid_argument, "FLUX config: every axes_dims_rope width must be even and positive");
}

}  // namespace cpdit::models::flux
