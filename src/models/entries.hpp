#pragma once
// Each model family's registry entry, defined in its own folder (models/<family>/registration.cpp).
// registry.cpp lists them explicitly: a self-registering static initialiser in a static library is
// dropped by the linker when nothing else references its object file.
#include <cpdit/models/registry.hpp>
#include <cpdit/nn/config_inference.hpp>

namespace cpdit::models {

// A ModelEntry's read_config for a family whose checkpoint reader `read(weights, config)` returns a
// struct with the config (one with fields(), for nn::config_json).
template <class Read>
ModelEntry::ReadConfig config_reader(Read read) {
  return [read](const std::string& weights, const std::optional<std::string>& config) {
    return nn::config_json(read(weights, config).config);
  };
}

// share_weights for a family whose original release names its tensors otherwise (FLUX.1, Wan): the
// LoadedModel also carries that layout, for the files that use those names (LoRA adapters).
template <class Checkpoint, class Load>
LoadedModel share_weights(std::string class_name, Checkpoint checkpoint, Load load, const nn::LoadOptions& options,
                          const nn::KeyLayout& original_names) {
  LoadedModel model = share_weights(std::move(class_name), std::move(checkpoint), load, options);
  model.original_names = &original_names;
  return model;
}

namespace flux {
ModelEntry registry_entry();
}
namespace wan {
ModelEntry registry_entry();
}
namespace skyreels_v2 {
ModelEntry registry_entry();
}
namespace qwenimage {
ModelEntry registry_entry();
}
namespace ltx_video {
ModelEntry registry_entry();
}
namespace text {
ModelEntry t5_registry_entry();
ModelEntry umt5_registry_entry();
ModelEntry qwen2_5_vl_registry_entry();
ModelEntry clip_text_registry_entry();
ModelEntry clip_vision_registry_entry(bool with_projection);
}  // namespace text
namespace vae {
ModelEntry autoencoder_kl_registry_entry();
ModelEntry autoencoder_kl_wan_registry_entry();
ModelEntry autoencoder_kl_qwenimage_registry_entry();  // the Wan architecture
ModelEntry autoencoder_kl_ltx_registry_entry();
}  // namespace vae
}  // namespace cpdit::models
