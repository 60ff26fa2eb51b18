// T5EncoderModel, UMT5EncoderModel, Qwen2_5_VLForConditionalGeneration (its language model), CLIPTextModel, CLIPVisionModel and CLIPVisionModelWithProjection (its
// tower alone, clip_vision.hpp's model) in the model registry, found by config.json's `architectures` or,
// without a config, by their tensor names (T5, UMT5 and CLIP ViT-L/14's text tower then load with the
// config their shapes give, single_file.hpp; the others need a config).
#include "models/entries.hpp"

#include <cpdit/models/text/checkpoint.hpp>

namespace cpdit::models::text {

namespace {
// With or without the encoder. prefix (single files of the encoder stack lack it).
bool has_t5_tensor(const io::Checkpoint& c, const std::string& name) {
  return c.contains("encoder." + name) || c.contains(name);
}
bool has_t5_tensors(const io::Checkpoint& c) {
  return has_t5_tensor(c, "block.0.layer.0.SelfAttention.q.weight") && has_t5_tensor(c, "final_layer_norm.weight");
}
bool has_clip_text_tensors(const io::Checkpoint& c) {
  return c.contains("text_model.embeddings.token_embedding.weight") || c.contains("embeddings.token_embedding.weight");
}
bool has_clip_vision_tensors(const io::Checkpoint& c) {
  return c.contains("vision_model.embeddings.class_embedding") || c.contains("embeddings.class_embedding");
}

bool has_qwen2_5_vl_tensors(const io::Checkpoint& c) {
  auto either = [&](const std::string& name) { return c.contains(name) || c.contains("model." + name); };
  return (c.contains("model.layers.0.self_attn.q_proj.bias") ||
          c.contains("model.language_model.layers.0.self_attn.q_proj.bias")) &&
         either("visual.patch_embed.proj.weight");
}

ModelEntry t5_entry(const std::string& class_name, bool umt5) {
  return {class_name,
          // UMT5 has a bias table in every block, T5 only in block 0.
          [umt5](const io::Checkpoint& c) {
            return has_t5_tensors(c) &&
                   has_t5_tensor(c, "block.1.layer.0.SelfAttention.relative_attention_bias.weight") == umt5;
          },
          [class_name, umt5](const std::string& path, const std::optional<std::string>& config, const nn::LoadOptions& load) {
            return share_weights(class_name, read_t5_checkpoint(path, config, umt5), load_t5, load);
          },
          read_t5_config};
}
}  // namespace

ModelEntry t5_registry_entry() { return t5_entry("T5EncoderModel", false); }
ModelEntry umt5_registry_entry() { return t5_entry("UMT5EncoderModel", true); }

ModelEntry qwen2_5_vl_registry_entry() {
  return {"Qwen2_5_VLForConditionalGeneration", has_qwen2_5_vl_tensors,
          [](const std::string& path, const std::optional<std::string>& config, const nn::LoadOptions& load) {
            return share_weights("Qwen2_5_VLForConditionalGeneration", read_qwen2_5_vl_checkpoint(path, config),
                                 load_qwen2_5_vl, load);
          },
          read_qwen2_5_vl_config};
}

ModelEntry clip_text_registry_entry() {
  return {"CLIPTextModel", has_clip_text_tensors,
          [](const std::string& path, const std::optional<std::string>& config, const nn::LoadOptions& load) {
            return share_weights("CLIPTextModel", read_clip_text_checkpoint(path, config), load_clip_text, load);
          },
          read_clip_text_config};
}

ModelEntry clip_vision_registry_entry(bool with_projection) {
  const std::string name = with_projection ? "CLIPVisionModelWithProjection" : "CLIPVisionModel";
  return {name,
          [with_projection](const io::Checkpoint& c) {
            return has_clip_vision_tensors(c) && c.contains("visual_projection.weight") == with_projection;
          },
          [name, with_projection](const std::string& path, const std::optional<std::string>& config,
                                  const nn::LoadOptions& load) {
            return share_weights(name, read_clip_vision_checkpoint(path, config, with_projection), load_clip_vision,
                                 load);
          }};
}

}  // namespace cpdit::models::text
