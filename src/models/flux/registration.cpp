// FluxTransformer2DModel in the model registry.
#include "models/entries.hpp"

#include <cpdit/models/flux/checkpoint.hpp>

namespace cpdit::models::flux {

LoadedModel share_flux(FluxCheckpoint checkpoint, const nn::LoadOptions& options) {
  return share_weights("FluxTransformer2DModel", std::move(checkpoint), load_flux, options);
}

ModelEntry registry_entry() {
  return {"FluxTransformer2DModel",
          [](const io::Checkpoint& c) {
            return c.contains("x_embedder.weight") || c.contains("img_in.weight") ||
                   c.contains("model.diffusion_model.img_in.weight");
          },
          [](const std::string& weights, const std::optional<std::string>& config, const nn::LoadOptions& load) {
            return share_flux(read_flux_checkpoint(weights, config), load);
          }};
}

}  // namespace cpdit::models::flux
