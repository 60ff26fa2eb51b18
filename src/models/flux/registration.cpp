// FluxTransformer2DModel in the model registry.
#include "models/entries.hpp"

#include <cpdit/models/flux/checkpoint.hpp>
#include <cpdit/nn/key_layout.hpp>

namespace cpdit::models::flux {

LoadedModel share_flux(FluxCheckpoint checkpoint, const nn::LoadOptions& options) {
  return share_weights("FluxTransformer2DModel", std::move(checkpoint), load_flux, options, original_names());
}

ModelEntry registry_entry() {
  return {"FluxTransformer2DModel",
          [](const io::Checkpoint& c) {
            // diffusers' names, or the original ones: img_in alone would also take Qwen-Image 2.1's
            // files (another architecture: txt_in.text_norm, a fused img_mlp.gate_up) for FLUX.1's
            return c.contains("x_embedder.weight") ||
                   (nn::contains_key(c, "img_in.weight") && nn::contains_key(c, "time_in.in_layer.weight"));
          },
          [](const std::string& weights, const std::optional<std::string>& config, const nn::LoadOptions& load) {
            return share_flux(read_flux_checkpoint(weights, config), load);
          },
          config_reader(read_flux_checkpoint)};
}

}  // namespace cpdit::models::flux
