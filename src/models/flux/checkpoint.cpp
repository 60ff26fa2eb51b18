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
      },
      {{"img_attn.qkv", {"attn.to_q", "attn.to_k", "attn.to_v"}},
       {"txt_attn.qkv", {"attn.add_q_proj", "attn.add_k_proj", "attn.add_v_proj"}}}},
     {"single_blocks",
      "single_transformer_blocks",
      {
          {"linear2", "proj_out"},
          {"modulation.lin", "norm.linear"},
          {"norm.query_norm.scale", "attn.norm_q.weight"},
          {"norm.key_norm.scale", "attn.norm_k.weight"},
      },
      {{"linear1", {"attn.to_q", "attn.to_k", "attn.to_v", "proj_mlp"}}}}},
};

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// The fused tensors (each block's qkv, the single blocks' MLP input) cut into diffusers' parts: `dim`
// rows each, the MLP input's rows after the attention's. False when `name` is not one of them.
bool cut_fused(nn::StateDict& out, const std::string& name, const Weight& t, int64_t dim) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos) return false;
  const std::string stem = name.substr(0, dot), suffix = name.substr(dot);  // ".weight" / ".bias"
  for (const nn::BlockRenames& block : kOriginalNames.blocks) {
    if (!starts_with(stem, block.from + ".")) continue;
    const size_t start = block.from.size() + 1, end = stem.find('.', start);
    if (end == std::string::npos) return false;
    const std::string index = stem.substr(start, end - start), rest = stem.substr(end + 1);
    for (const nn::FusedStem& fused : block.fused) {
      if (rest != fused.stem) continue;
      std::vector<std::string> names;
      std::vector<int64_t> rows;
      for (const std::string& part : fused.parts) names.push_back(block.to + "." + index + "." + part + suffix);
      for (size_t i = 0; i + 1 < fused.parts.size(); ++i) rows.push_back(dim);
      rows.push_back(fused.parts.back() == "proj_mlp" ? t.shape()[0] - dim * int64_t(rows.size()) : dim);
      nn::cut_rows(out, t, names, rows, "original FLUX checkpoint: " + name);
      return true;
    }
  }
  return false;
}
}  // namespace

const nn::KeyLayout& original_names() { return kOriginalNames; }

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
