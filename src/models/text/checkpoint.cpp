#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/io/model_files.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/models/text/checkpoint.hpp>

#include <functional>

#include "models/text/single_file.hpp"

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

namespace {

// A T5 / UMT5 file's tensors in transformers' names, the tied embedding kept once, under the name of the
// module that reads it (files hold shared.weight, encoder.embed_tokens.weight or both).
nn::StateDict t5_state(const std::string& weights, const char* model) {
  nn::StateDict state = t5_in_transformers_names(nn::read_state_dict(io::Checkpoint::open(weights)));
  auto shared = state.find("shared.weight");
  if (shared != state.end()) {
    auto embed = state.find("encoder.embed_tokens.weight");
    if (embed == state.end()) {
      state.emplace("encoder.embed_tokens.weight", shared->second);
    } else {
      CPDIT_CHECK(embed->second.shape() == shared->second.shape(), invalid_argument, model,
                  ": the tied shared.weight ", shared->second.describe(), " and encoder.embed_tokens.weight ",
                  embed->second.describe(), " differ in shape");
    }
    state.erase("shared.weight");
  }
  return state;
}

// A CLIP text tower's tensors; ComfyUI's clip_l.safetensors (no config.json) keeps CLIPModel's projection
// and logit scale beside the tower, which CLIPTextModel (what FLUX.1 runs) has neither of.
nn::StateDict clip_text_state(const io::ModelFiles& files) {
  nn::StateDict state = clip_tower_state(files.weights, "text_model.");
  if (!files.config) {
    state.erase("text_projection.weight");
    state.erase("logit_scale");
  }
  return state;
}

// The config.json, else (a single file) the one its shapes give.
nlohmann::json config_json(const io::ModelFiles& files, const std::function<nlohmann::json()>& from_shapes) {
  return files.config ? io::read_json(*files.config) : from_shapes();
}

}  // namespace

nlohmann::json read_t5_config(const std::string& path, const std::optional<std::string>& config_path) {
  const io::ModelFiles files = io::resolve_model(path, "text_encoder", config_path);
  return config_json(files, [&] { return t5_config_from_shapes(t5_state(files.weights, "T5"), path); });
}

T5Checkpoint read_t5_checkpoint(const std::string& path, const std::optional<std::string>& config_path, bool umt5) {
  const io::ModelFiles files = io::resolve_model(path, "text_encoder", config_path);
  nn::StateDict state = t5_state(files.weights, umt5 ? "UMT5EncoderModel" : "T5EncoderModel");
  const nlohmann::json config = config_json(files, [&] { return t5_config_from_shapes(state, path); });
  return {T5Config::from_json(config, umt5), std::move(state)};
}

nlohmann::json read_clip_text_config(const std::string& path, const std::optional<std::string>& config_path) {
  const io::ModelFiles files = io::resolve_model(path, "text_encoder", config_path);
  return config_json(files, [&] { return clip_text_config_from_shapes(clip_text_state(files), path); });
}

ClipTextCheckpoint read_clip_text_checkpoint(const std::string& path, const std::optional<std::string>& config_path) {
  const io::ModelFiles files = io::resolve_model(path, "text_encoder", config_path);
  nn::StateDict state = clip_text_state(files);
  const nlohmann::json config = config_json(files, [&] { return clip_text_config_from_shapes(state, path); });
  return {ClipTextConfig::from_json(config), std::move(state)};
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

namespace {
// Qwen2.5-VL's language model: the released files' model.* tensors, or transformers 5's in-memory names
// (model.language_model.*) read as those; the vision tower and lm_head left out.
nn::StateDict qwen2_5_vl_state(const std::string& weights) {
  nn::StateDict state;
  const std::string inner = "model.language_model.";
  for (auto& [name, t] : nn::read_state_dict(io::Checkpoint::open(weights))) {
    if (name.rfind(inner, 0) == 0) state.emplace("model." + name.substr(inner.size()), t);
    else if (name.rfind("model.", 0) == 0 && name.rfind("model.visual.", 0) != 0) state.emplace(name, t);
  }
  return state;
}
}  // namespace

nlohmann::json read_qwen2_5_vl_config(const std::string& path, const std::optional<std::string>& config_path) {
  const io::ModelFiles files = io::resolve_model(path, "text_encoder", config_path);
  return config_json(files, [&] { return qwen2_5_vl_config_from_shapes(qwen2_5_vl_state(files.weights), path); });
}

Qwen2_5_VLCheckpoint read_qwen2_5_vl_checkpoint(const std::string& path, const std::optional<std::string>& config_path) {
  const io::ModelFiles files = io::resolve_model(path, "text_encoder", config_path);
  nn::StateDict state = qwen2_5_vl_state(files.weights);
  const nlohmann::json config = config_json(files, [&] { return qwen2_5_vl_config_from_shapes(state, path); });
  return {Qwen2_5_VLTextConfig::from_json(config), std::move(state)};
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
