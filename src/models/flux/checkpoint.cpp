#include <cpdit/core/error.hpp>
#include <cpdit/models/flux/checkpoint.hpp>
#include <cpdit/nn/config_inference.hpp>

#include <utility>

namespace cpdit::models::flux {

namespace {
const std::string kComfyPrefix = "model.diffusion_model.";

// Original name stem -> diffusers stem, for tensors that only change name.
const std::vector<std::pair<std::string, std::string>> kRenames = {
    {"img_in", "x_embedder"},
    {"txt_in", "context_embedder"},
    {"time_in.in_layer", "time_text_embed.timestep_embedder.linear_1"},
    {"time_in.out_layer", "time_text_embed.timestep_embedder.linear_2"},
    {"vector_in.in_layer", "time_text_embed.text_embedder.linear_1"},
    {"vector_in.out_layer", "time_text_embed.text_embedder.linear_2"},
    {"guidance_in.in_layer", "time_text_embed.guidance_embedder.linear_1"},
    {"guidance_in.out_layer", "time_text_embed.guidance_embedder.linear_2"},
    {"final_layer.linear", "proj_out"},
};
const std::vector<std::pair<std::string, std::string>> kDoubleRenames = {
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
};
const std::vector<std::pair<std::string, std::string>> kSingleRenames = {
    {"linear2", "proj_out"},
    {"modulation.lin", "norm.linear"},
    {"norm.query_norm.scale", "attn.norm_q.weight"},
    {"norm.key_norm.scale", "attn.norm_k.weight"},
};

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// "double_blocks.7.img_attn.qkv.weight" -> ("7", "img_attn.qkv.weight") when s starts with head + ".".
std::optional<std::pair<std::string, std::string>> block_parts(const std::string& s, const std::string& head) {
  if (!starts_with(s, head + ".")) return std::nullopt;
  size_t start = head.size() + 1, dot = s.find('.', start);
  if (dot == std::string::npos) return std::nullopt;
  return std::make_pair(s.substr(start, dot - start), s.substr(dot + 1));
}

// stem + ".weight"/".bias" renamed when stem matches `from` exactly.
std::optional<std::string> rename(const std::string& rest, const std::string& from, const std::string& to) {
  if (rest == from) return to;  // a tensor named without suffix (".scale" entries carry it in `from`)
  for (const char* suffix : {".weight", ".bias"})
    if (rest == from + suffix) return to + suffix;
  return std::nullopt;
}

// Cuts a fused tensor's rows into parts of the given sizes, named stems[i] + suffix.
void cut_rows(nn::StateDict& out, const Weight& fused, const std::vector<std::string>& stems,
              const std::vector<int64_t>& rows, const std::string& suffix) {
  int64_t total = 0;
  for (int64_t r : rows) total += r;
  CPDIT_CHECK(fused.shape()[0] == total, invalid_argument, "original FLUX checkpoint: fused tensor for ", stems[0],
              " has ", fused.shape()[0], " rows, expected ", total);
  int64_t at = 0;
  for (size_t i = 0; i < stems.size(); ++i) {
    out[stems[i] + suffix] = fused.narrow_rows(at, rows[i]);
    at += rows[i];
  }
}
}  // namespace

bool is_original_layout(const nn::StateDict& state) {
  return state.count("img_in.weight") || state.count(kComfyPrefix + "img_in.weight");
}

nn::StateDict to_diffusers_layout(const nn::StateDict& input) {
  if (!is_original_layout(input)) return input;
  nn::StateDict state;
  for (const auto& [name, t] : input) state[starts_with(name, kComfyPrefix) ? name.substr(kComfyPrefix.size()) : name] = t;
  const int64_t dim = state.at("img_in.weight").shape()[0];

  nn::StateDict out;
  for (const auto& [name, t] : state) {
    std::string suffix = name.substr(name.rfind('.'));  // ".weight" / ".bias" / ".scale"
    auto put = [&](const std::vector<std::pair<std::string, std::string>>& table, const std::string& rest,
                   const std::string& prefix) {
      for (const auto& [from, to] : table)
        if (auto renamed = rename(rest, from, to)) {
          out[prefix + *renamed] = t;
          return true;
        }
      return false;
    };
    if (auto d = block_parts(name, "double_blocks")) {
      const std::string prefix = "transformer_blocks." + d->first + ".";
      if (d->second == "img_attn.qkv" + suffix)
        cut_rows(out, t, {prefix + "attn.to_q", prefix + "attn.to_k", prefix + "attn.to_v"}, {dim, dim, dim}, suffix);
      else if (d->second == "txt_attn.qkv" + suffix)
        cut_rows(out, t, {prefix + "attn.add_q_proj", prefix + "attn.add_k_proj", prefix + "attn.add_v_proj"},
                 {dim, dim, dim}, suffix);
      else if (!put(kDoubleRenames, d->second, prefix))
        out[name] = t;
    } else if (auto s = block_parts(name, "single_blocks")) {
      const std::string prefix = "single_transformer_blocks." + s->first + ".";
      if (s->second == "linear1" + suffix)
        cut_rows(out, t, {prefix + "attn.to_q", prefix + "attn.to_k", prefix + "attn.to_v", prefix + "proj_mlp"},
                 {dim, dim, dim, t.shape()[0] - 3 * dim}, suffix);
      else if (!put(kSingleRenames, s->second, prefix))
        out[name] = t;
    } else if (starts_with(name, "final_layer.adaLN_modulation.1.")) {
      // The original orders the rows (shift, scale); diffusers' norm_out.linear (scale, shift).
      out["norm_out.linear" + suffix] = Weight::cat_rows({t.narrow_rows(dim, dim), t.narrow_rows(0, dim)});
    } else if (!put(kRenames, name, "")) {
      out[name] = t;
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
