#include <cpdit/core/error.hpp>
#include <cpdit/models/flux/checkpoint.hpp>
#include <cpdit/nn/config_inference.hpp>
#include <cpdit/nn/key_layout.hpp>

#include <utility>

namespace cpdit::models::flux {

namespace {
// The original (Black Forest Labs) names of the tensors that only change name.
const nn::KeyLayout kOriginalNames = {
    {
        {"img_in", "x_embedder"},
        {"txt_in", "context_embedder"},
        {"time_in.in_layer", "time_text_embed.timestep_embedder.linear_1"},
        {"time_in.out_layer", "time_text_embed.timestep_embedder.linear_2"},
        {"vector_in.in_layer", "time_text_embed.text_embedder.linear_1"},
        {"vector_in.out_layer", "time_text_embed.text_embedder.linear_2"},
        {"guidance_in.in_layer", "time_text_embed.guidance_embedder.linear_1"},
        {"guidance_in.out_layer", "time_text_embed.guidance_embedder.linear_2"},
        {"final_layer.linear", "proj_out"},
    },
    {{"double_blocks",
      "transformer_blocks",
      {
          {"img_mod.lin", "norm1.linear"},
          {"txt_mod.lin", "norm1_context.linear"},
          {"img_attn.norm.query_norm.scale", "attn.norm_q.weight"},
          {"img_attn.norm.key_norm.scale", "attn.norm_k.weight"},
          {"txt_attn.norm.query_norm.scale", "attn.norm_added_q.weight"},
          {"txt_attn.norm.key_norm.scale", "attn.norm_added_k.weight"},
          {"img_attn.proj", "attn.to_out.0"},
          {"txt_attn.proj", "attn.to_add_out"},
          {"img_mlp.0", "ff.net.0.proj"},
          {"img_mlp.2", "ff.net.2"},
          {"txt_mlp.0", "ff_context.net.0.proj"},
          {"txt_mlp.2", "ff_context.net.2"},
      }},
     {"single_blocks",
      "single_transformer_blocks",
      {
          {"linear2", "proj_out"},
          {"modulation.lin", "norm.linear"},
          {"norm.query_norm.scale", "attn.norm_q.weight"},
          {"norm.key_norm.scale", "attn.norm_k.weight"},
      }}},
};

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// "double_blocks.7.img_attn.qkv.weight" -> ("7", "img_attn.qkv.weight") when s starts with head + ".".
std::optional<std::pair<std::string, std::string>> block_parts(const std::string& s, const std::string& head) {
  if (!starts_with(s, head + ".")) return std::nullopt;
  size_t start = head.size() + 1, dot = s.find('.', start);
  if (dot == std::string::npos) return std::nullopt;
  return std::make_pair(s.substr(start, dot - start), s.substr(dot + 1));
}

// The fused tensors: each block's qkv (and the single blocks' MLP input) cut into diffusers' parts.
// False when `name` is not one of them.
bool cut_fused(nn::StateDict& out, const std::string& name, const Weight& t, int64_t dim) {
  const std::string suffix = name.substr(name.rfind('.'));  // ".weight" / ".bias"
  auto cut = [&](const std::string& prefix, const std::vector<std::string>& stems, const std::vector<int64_t>& rows) {
    std::vector<std::string> names;
    for (const std::string& stem : stems) names.push_back(prefix + stem + suffix);
    nn::cut_rows(out, t, names, rows, "original FLUX checkpoint: " + name);
    return true;
  };
  if (auto d = block_parts(name, "double_blocks")) {
    const std::string prefix = "transformer_blocks." + d->first + ".";
    if (d->second == "img_attn.qkv" + suffix)
      return cut(prefix, {"attn.to_q", "attn.to_k", "attn.to_v"}, {dim, dim, dim});
    if (d->second == "txt_attn.qkv" + suffix)
      return cut(prefix, {"attn.add_q_proj", "attn.add_k_proj", "attn.add_v_proj"}, {dim, dim, dim});
  } else if (auto s = block_parts(name, "single_blocks")) {
    if (s->second == "linear1" + suffix)
      return cut("single_transformer_blocks." + s->first + ".", {"attn.to_q", "attn.to_k", "attn.to_v", "proj_mlp"},
                 {dim, dim, dim, t.shape()[0] - 3 * dim});
  }
  return false;
}
}  // namespace

bool is_original_layout(const nn::StateDict& state) { return nn::contains_key(state, "img_in.weight"); }

nn::StateDict to_diffusers_layout(const nn::StateDict& input) {
  if (!is_original_layout(input)) return input;
  const nn::StateDict state = nn::without_prefix(input);
  const int64_t dim = state.at("img_in.weight").shape()[0];
  nn::StateDict out;
  for (const auto& [name, t] : state) {
    if (cut_fused(out, name, t, dim)) continue;
    if (starts_with(name, "final_layer.adaLN_modulation.1.")) {
      // The original orders the rows (shift, scale); diffusers' norm_out.linear (scale, shift).
      out["norm_out.linear" + name.substr(name.rfind('.'))] = Weight::cat_rows({t.narrow_rows(dim, dim), t.narrow_rows(0, dim)});
    } else {
      out[nn::renamed_key(name, kOriginalNames).value_or(name)] = t;
    }
  }
  return out;
}

FluxCheckpoint read_flux_checkpoint(const std::string& path, const std::optional<std::string>& config_path) {
  return nn::read_transformer_checkpoint<FluxCheckpoint>(path, config_path, to_diffusers_layout);
}

std::unique_ptr<FluxTransformer2DModel> load_flux(const FluxCheckpoint& checkpoint, const nn::LoadOptions& options) {
  return nn::load_model<FluxTransformer2DModel>(checkpoint, options);
}

}  // namespace cpdit::models::flux
