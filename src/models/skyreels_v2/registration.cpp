// SkyReelsV2Transformer3DModel in the model registry. Its tensors are Wan's (plus the fps ones when
// inject_sample_info), so a checkpoint is recognised by its config's _class_name, or by fps_embedding.
#include "models/entries.hpp"

#include <cpdit/models/skyreels_v2/model.hpp>

namespace cpdit::models::skyreels_v2 {

ModelEntry registry_entry() {
  return {"SkyReelsV2Transformer3DModel",
          [](const io::Checkpoint& c) {
            return c.contains("fps_embedding.weight") && c.contains("condition_embedder.time_proj.weight");
          },
          [](const std::string& path, const std::optional<std::string>& config, const nn::LoadOptions& load) {
            return share_weights("SkyReelsV2Transformer3DModel", read_skyreels_v2_checkpoint(path, config),
                                 load_skyreels_v2, load);
          }};
}

}  // namespace cpdit::models::skyreels_v2
