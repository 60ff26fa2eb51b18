// FluxTransformer2DModel for the command line's model registry.
#include "model_registry.hpp"

#include <cpdit/models/flux/checkpoint.hpp>

namespace cpdit::app {
namespace {

LoadedTransformer open_flux(const std::string& path, const std::optional<std::string>& config,
                            const nn::LoadOptions& load) {
  auto checkpoint = std::make_shared<models::flux::FluxCheckpoint>(models::flux::read_flux_checkpoint(path, config));
  // Converted once to the load dtype; every replica shares these tensors.
  checkpoint->state = nn::parameters_of(*models::flux::load_flux(*checkpoint, load));
  LoadedTransformer t;
  t.class_name = "FluxTransformer2DModel";
  t.heads = checkpoint->config.num_attention_heads;
  t.replica = [checkpoint, load]() -> std::unique_ptr<nn::Model> { return models::flux::load_flux(*checkpoint, load); };
  return t;
}

const bool registered = register_transformer({
    "FluxTransformer2DModel",
    [](const io::Checkpoint& c) {
      return c.contains("x_embedder.weight") || c.contains("img_in.weight") ||
             c.contains("model.diffusion_model.img_in.weight");
    },
    open_flux,
});

}  // namespace
}  // namespace cpdit::app
