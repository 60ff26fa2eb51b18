#include <cpdit/models/wan/checkpoint.hpp>
#include <cpdit/nn/config_inference.hpp>
#include <cpdit/nn/key_layout.hpp>

namespace cpdit::models::wan {

namespace {
// Wan 2.1's original names (the released single files, and the GGUF files ComfyUI-GGUF and
// stable-diffusion.cpp convert from them) and diffusers' for the same tensors, as diffusers' own
// single-file conversion renames them. The shapes are the same in both.
const nn::KeyLayout kWanOriginalNames = {
    {
        {"text_embedding.0", "condition_embedder.text_embedder.linear_1"},
        {"text_embedding.2", "condition_embedder.text_embedder.linear_2"},
        {"time_embedding.0", "condition_embedder.time_embedder.linear_1"},
        {"time_embedding.2", "condition_embedder.time_embedder.linear_2"},
        {"time_projection.1", "condition_embedder.time_proj"},
        {"head.head", "proj_out"},
        {"head.modulation", "scale_shift_table"},
        // I2V: the CLIP image embedding's projection (LayerNorm, Linear, GELU, Linear, LayerNorm)
        {"img_emb.proj.0", "condition_embedder.image_embedder.norm1"},
        {"img_emb.proj.1", "condition_embedder.image_embedder.ff.net.0.proj"},
        {"img_emb.proj.3", "condition_embedder.image_embedder.ff.net.2"},
        {"img_emb.proj.4", "condition_embedder.image_embedder.norm2"},
        // FLF2V: the position embedding of the first and the last image's tokens (Wan's MLPProj.emb_pos;
        // diffusers' single-file conversion leaves it out, its conversion script names it so)
        {"img_emb.emb_pos", "condition_embedder.image_embedder.pos_embed"},
    },
    {{"blocks",
      "blocks",
      {
          {"self_attn.q", "attn1.to_q"},
          {"self_attn.k", "attn1.to_k"},
          {"self_attn.v", "attn1.to_v"},
          {"self_attn.o", "attn1.to_out.0"},
          {"self_attn.norm_q", "attn1.norm_q"},
          {"self_attn.norm_k", "attn1.norm_k"},
          {"cross_attn.q", "attn2.to_q"},
          {"cross_attn.k", "attn2.to_k"},
          {"cross_attn.v", "attn2.to_v"},
          {"cross_attn.o", "attn2.to_out.0"},
          {"cross_attn.norm_q", "attn2.norm_q"},
          {"cross_attn.norm_k", "attn2.norm_k"},
          // I2V: cross-attention's keys and values of the image tokens
          {"cross_attn.k_img", "attn2.add_k_proj"},
          {"cross_attn.v_img", "attn2.add_v_proj"},
          {"cross_attn.norm_k_img", "attn2.norm_added_k"},
          // The original's norm3 (before cross-attention, the one with weights) is diffusers' norm2.
          {"norm3", "norm2"},
          {"ffn.0", "ffn.net.0.proj"},
          {"ffn.2", "ffn.net.2"},
          {"modulation", "scale_shift_table"},
      },
      {}}},
};

// stable-diffusion.cpp keeps tensors to ggml's 4 dims and stores the (dim, in, t, h, w) patch
// embedding as (dim * in, t, h, w): the same values in the same order, so a view unfolds it.
void unfold_patch_embedding(nn::StateDict& state) {
  auto weight = state.find("patch_embedding.weight"), bias = state.find("patch_embedding.bias");
  if (weight == state.end() || bias == state.end() || weight->second.is_quantised()) return;
  const Shape& folded = weight->second.shape();
  const int64_t dim = bias->second.shape()[0];
  if (folded.size() != 4 || dim <= 0 || folded[0] % dim != 0) return;  // the loader names the shape
  weight->second = weight->second.values().reshape({dim, folded[0] / dim, folded[1], folded[2], folded[3]});
}

nn::StateDict wan_diffusers_layout(const nn::StateDict& input) {
  if (!nn::contains_key(input, "head.modulation")) return input;
  nn::StateDict state = nn::renamed_keys(nn::without_prefix(input), kWanOriginalNames);
  unfold_patch_embedding(state);
  return state;
}
}  // namespace

const nn::KeyLayout& original_names() { return kWanOriginalNames; }

WanCheckpoint read_wan_checkpoint(const std::string& path, const std::optional<std::string>& config_path) {
  return nn::read_transformer_checkpoint<WanCheckpoint>(path, config_path, wan_diffusers_layout);
}

std::unique_ptr<WanTransformer3DModel> load_wan(const WanCheckpoint& checkpoint, const nn::LoadOptions& options) {
  return nn::load_model<WanTransformer3DModel>(checkpoint, options);
}

}  // namespace cpdit::models::wan
