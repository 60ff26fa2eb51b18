// QwenImageTransformer2DModel in the model registry.
#include "models/entries.hpp"

#include <cpdit/models/qwenimage/checkpoint.hpp>
#include <cpdit/nn/key_layout.hpp>

namespace cpdit::models::qwenimage {

LoadedModel share_qwenimage(QwenImageCheckpoint checkpoint, const nn::LoadOptions& options) {
  return share_weights("QwenImageTransformer2DModel", std::move(checkpoint), load_qwenimage, options);
}

ModelEntry registry_entry() {
  return {"QwenImageTransformer2DModel",
          [](const io::Checkpoint& c) {
            // diffusers' names, which the original release and its GGUF conversions use too (maybe prefixed)
            return nn::contains_key(c, "txt_norm.weight") && nn::contains_key(c, "img_in.weight");
          },
          [](const std::string& path, const std::optional<std::string>& config, const nn::LoadOptions& load) {
            return share_qwenimage(read_qwenimage_checkpoint(path, config), load);
          },
          config_reader(read_qwenimage_checkpoint)};
}

}  // namespace cpdit::models::qwenimage
