// WanTransformer3DModel in the model registry.
#include "models/entries.hpp"

#include <cpdit/models/wan/checkpoint.hpp>
#include <cpdit/nn/key_layout.hpp>

namespace cpdit::models::wan {

LoadedModel share_wan(WanCheckpoint checkpoint, const nn::LoadOptions& options) {
  return share_weights("WanTransformer3DModel", std::move(checkpoint), load_wan, options, original_names());
}

ModelEntry registry_entry() {
  return {"WanTransformer3DModel",
          [](const io::Checkpoint& c) {
            // diffusers' names, or the original ones (head.modulation: what diffusers tells Wan by)
            return nn::contains_key(c, "patch_embedding.weight") &&
                   (c.contains("condition_embedder.time_proj.weight") || nn::contains_key(c, "head.modulation"));
          },
          [](const std::string& weights, const std::optional<std::string>& config, const nn::LoadOptions& load) {
            return share_wan(read_wan_checkpoint(weights, config), load);
          },
          config_reader(read_wan_checkpoint)};
}

}  // namespace cpdit::models::wan
