// WanTransformer3DModel for the command line's model registry.
#include "model_registry.hpp"

#include <cpdit/models/wan/checkpoint.hpp>

namespace cpdit::app {
namespace {

LoadedTransformer open_wan(const std::string& path, const std::optional<std::string>& config,
                           const nn::LoadOptions& load) {
  auto checkpoint = std::make_shared<models::wan::WanCheckpoint>(models::wan::read_wan_checkpoint(path, config));
  // Converted once to the load dtype; every replica shares these tensors.
  checkpoint->state = nn::parameters_of(*models::wan::load_wan(*checkpoint, load));
  LoadedTransformer t;
  t.class_name = "WanTransformer3DModel";
  t.heads = checkpoint->config.num_attention_heads;
  t.replica = [checkpoint, load]() -> std::unique_ptr<nn::Model> { return models::wan::load_wan(*checkpoint, load); };
  return t;
}

const bool registered = register_transformer({
    "WanTransformer3DModel",
    [](const io::Checkpoint& c) { return c.contains("patch_embedding.weight") && c.contains("condition_embedder.time_proj.weight"); },
    open_wan,
});

}  // namespace
}  // namespace cpdit::app
