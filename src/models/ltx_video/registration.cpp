// LTXVideoTransformer3DModel in the model registry.
#include "models/entries.hpp"

#include <cpdit/models/ltx_video/checkpoint.hpp>
#include <cpdit/nn/key_layout.hpp>

namespace cpdit::models::ltx_video {

LoadedModel share_ltx_video(LtxVideoCheckpoint checkpoint, const nn::LoadOptions& options) {
  return share_weights("LTXVideoTransformer3DModel", std::move(checkpoint), load_ltx_video, options);
}

ModelEntry registry_entry() {
  return {"LTXVideoTransformer3DModel",
          [](const io::Checkpoint& c) {
            const bool diffusers = c.contains("time_embed.emb.timestep_embedder.linear_1.weight") && c.contains("proj_in.weight");
            const bool original = nn::contains_key(c, "adaln_single.emb.timestep_embedder.linear_1.weight") &&
                                  nn::contains_key(c, "patchify_proj.weight");
            return (diffusers || original) && nn::contains_key(c, "caption_projection.linear_1.weight");
          },
          [](const std::string& weights, const std::optional<std::string>& config, const nn::LoadOptions& load) {
            return share_ltx_video(read_ltx_video_checkpoint(weights, config), load);
          },
          config_reader(read_ltx_video_checkpoint)};
}

}  // namespace cpdit::models::ltx_video
