#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/io/model_files.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/models/text/checkpoint.hpp>

namespace cpdit::models::text {

namespace {

// The weights and config.json at `path` (an encoder of a diffusers pipeline folder is its `component`
// folder); the config cannot be told from the tensors, so it must exist.
io::ModelFiles text_encoder_files(const std::string& path, const std::optional<std::string>& config_path,
                                  const char* model, const char* component = "text_encoder") {
  io::ModelFiles files = io::resolve_model(path, component, config_path);
  CPDIT_CHECK(files.config, io, model, " at ", path, " needs a config.json (beside the weights, or --config)");
  return files;
}

// A CLIP tower's tensors under transformers 5's names: hub checkpoints written before it prefix every
// key with the tower's `prefix` (text_model., vision_model.), and also store the position_ids buffer,
// which the model makes itself.
nn::StateDict clip_tower_state(const std::string& weights, const std::string& prefix) {
  nn::StateDict state;
  for (auto& [name, t] : nn::read_state_dict(io::Checkpoint::open(weights))) {
    std::string key = name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
    if (key == "embeddings.position_ids") continue;
    state.emplace(std::move(key), t);
  }
  return state;
}

}  // namespace

T5Checkpoint read_t5_checkpoint(const std::string& path, const std::optional<std::string>& config_path, bool umt5) {
  const char* model = umt5 ? "UMT5EncoderModel" : "T5EncoderModel";
  const io::ModelFiles files = text_encoder_files(path, config_path, model);
  T5Checkpoint c{T5Config::from_json(io::read_json(*files.config), umt5),
                 nn::read_state_dict(io::Checkpoint::open(files.weights))};
  // transformers ties shared.weight and encoder.embed_tokens.weight; files hold both or either.
  // Keep one tensor, under the name of the module that reads it.
  auto shared = c.state.find("shared.weight");
  if (shared != c.state.end()) {
    auto embed = c.state.find("encoder.embed_tokens.weight");
    if (embed == c.state.end()) {
      c.state.emplace("encoder.embed_tokens.weight", shared->second);
    } else {
      CPDIT_CHECK(embed->second.shape() == shared->second.shape(), invalid_argument, model,
                  ": the tied shared.weight ", shared->second.describe(), " and encoder.embed_tokens.weight ",
                  embed->second.describe(), " differ in shape");
    }
    c.state.erase("shared.weight");
  }
  return c;
}

ClipTextCheckpoint read_clip_text_checkpoint(const std::string& path, const std::optional<std::string>& config_path) {
  const io::ModelFiles files = text_encoder_files(path, config_path, "CLIPTextModel");
  return {ClipTextConfig::from_json(io::read_json(*files.config)), clip_tower_state(files.weights, "text_model.")};
}

ClipVisionCheckpoint read_clip_vision_checkpoint(const std::string& path, const std::optional<std::string>& config_path,
                                                 bool with_projection) {
  const char* model = with_projection ? "CLIPVisionModelWithProjection" : "CLIPVisionModel";
  const io::ModelFiles files = text_encoder_files(path, config_path, model, "image_encoder");
  ClipVisionCheckpoint c{ClipVisionConfig::from_json(io::read_json(*files.config)),
                         clip_tower_state(files.weights, "vision_model.")};
  CPDIT_CHECK(!with_projection || c.state.erase("visual_projection.weight") == 1, invalid_argument, model, " at ",
              path, " has no visual_projection.weight");
  return c;
}

Qwen2_5_VLCheckpoint read_qwen2_5_vl_checkpoint(const std::string& path, const std::optional<std::string>& config_path) {
  const io::ModelFiles files = text_encoder_files(path, config_path, "Qwen2_5_VLForConditionalGeneration");
  Qwen2_5_VLCheckpoint c{Qwen2_5_VLTextConfig::from_json(io::read_json(*files.config)), {}};
  const std::string inner = "model.language_model.";
  for (auto& [name, t] : nn::read_state_dict(io::Checkpoint::open(files.weights))) {
    if (name.rfind(inner, 0) == 0) c.state.emplace("model." + name.substr(inner.size()), t);
    else if (name.rfind("model.", 0) == 0 && name.rfind("model.visual.", 0) != 0) c.state.emplace(name, t);
  }
  return c;
}

std::unique_ptr<T5EncoderModel> load_t5(const T5Checkpoint& checkpoint, const nn::LoadOptions& options) {
  return nn::load_model<T5EncoderModel>(checkpoint, options);
}

std::unique_ptr<CLIPTextModel> load_clip_text(const ClipTextCheckpoint& checkpoint, const nn::LoadOptions& options) {
  return nn::load_model<CLIPTextModel>(checkpoint, options);
}

std::unique_ptr<Qwen2_5_VLTextModel> load_qwen2_5_vl(const Qwen2_5_VLCheckpoint& checkpoint,
                                                     const nn::LoadOptions& options) {
  return nn::load_model<Qwen2_5_VLTextModel>(checkpoint, options);
}

std::unique_ptr<CLIPVisionModel> load_clip_vision(const ClipVisionCheckpoint& checkpoint, const nn::LoadOptions& options) {
  return nn::load_model<CLIPVisionModel>(checkpoint, options);
}

}  // namespace cpdit::models::text
