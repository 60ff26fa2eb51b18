#include <cpdit/models/ltx_video/checkpoint.hpp>
#include <cpdit/nn/config_inference.hpp>
#include <cpdit/nn/key_layout.hpp>

namespace cpdit::models::ltx_video {

namespace {
// LTX-Video's original names (the released single files, and the GGUF files ComfyUI-GGUF converts from
// them) and diffusers' for the same tensors, as diffusers' own single-file conversion renames them.
const nn::KeyLayout kLtxOriginalNames = {
    {
        {"patchify_proj", "proj_in"},
        {"adaln_single.emb.timestep_embedder.linear_1", "time_embed.emb.timestep_embedder.linear_1"},
        {"adaln_single.emb.timestep_embedder.linear_2", "time_embed.emb.timestep_embedder.linear_2"},
        {"adaln_single.linear", "time_embed.linear"},
    },
    {{"transformer_blocks",
      "transformer_blocks",
      {
          {"attn1.q_norm", "attn1.norm_q"},
          {"attn1.k_norm", "attn1.norm_k"},
          {"attn2.q_norm", "attn2.norm_q"},
          {"attn2.k_norm", "attn2.norm_k"},
      },
      {}}},
};

nn::StateDict ltx_diffusers_layout(const nn::StateDict& input) {
  if (!nn::contains_key(input, "patchify_proj.weight")) return input;
  return nn::renamed_keys(nn::without_prefix(input), kLtxOriginalNames);
}
}  // namespace

LtxVideoCheckpoint read_ltx_video_checkpoint(const std::string& path, const std::optional<std::string>& config_path) {
  return nn::read_transformer_checkpoint<LtxVideoCheckpoint>(path, config_path, ltx_diffusers_layout);
}

std::unique_ptr<LTXVideoTransformer3DModel> load_ltx_video(const LtxVideoCheckpoint& checkpoint,
                                                           const nn::LoadOptions& options) {
  return nn::load_model<LTXVideoTransformer3DModel>(checkpoint, options);
}

}  // namespace cpdit::models::ltx_video
