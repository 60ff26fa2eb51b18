#pragma once
// Reading text encoders in the transformers layout: a folder with config.json and model.safetensors
// (or model-0000k-of-0000n.safetensors + model.safetensors.index.json), an index json, or one file
// with a separate config.json. Weights may be f32 or bf16; bf16 matrices stay bf16 (T5-XXL is 9.5 GB
// in bf16: never widened to a whole f32 copy), widened per GEMM.
#include <cpdit/models/text/clip.hpp>
#include <cpdit/models/text/clip_vision.hpp>
#include <cpdit/models/text/qwen2_5_vl.hpp>
#include <cpdit/models/text/t5.hpp>
#include <cpdit/nn/load.hpp>

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>

namespace cpdit::models::text {

struct T5Checkpoint {
  T5Config config;
  nn::StateDict state;  // transformers keys; the tied embedding table once, as encoder.embed_tokens.weight
};

struct ClipTextCheckpoint {
  ClipTextConfig config;
  nn::StateDict state;  // transformers 5 keys (no text_model. prefix)
};

struct ClipVisionCheckpoint {
  ClipVisionConfig config;
  nn::StateDict state;  // transformers 5 keys (no vision_model. prefix)
};

struct Qwen2_5_VLCheckpoint {
  Qwen2_5_VLTextConfig config;
  nn::StateDict state;  // the language model's tensors as model.* (no vision tower, no lm_head)
};

// `path` is any layout io::resolve_model takes (text_encoder/ of a pipeline folder; image_encoder/ for
// CLIPVisionModel; a single file, ComfyUI's layouts included). config_path overrides the folder's
// config.json; without either, T5's, CLIP ViT-L/14's text tower's and Qwen2.5-VL-7B's come from their shapes
// (models/text/single_file.hpp), the others' must exist (head counts are not in the tensors). umt5 selects
// UMT5EncoderModel.
T5Checkpoint read_t5_checkpoint(const std::string& path, const std::optional<std::string>& config_path, bool umt5);
ClipTextCheckpoint read_clip_text_checkpoint(const std::string& path, const std::optional<std::string>& config_path);
// The config.json those open with (a single file's from its shapes), without reading the weights.
nlohmann::json read_t5_config(const std::string& path, const std::optional<std::string>& config_path);
nlohmann::json read_clip_text_config(const std::string& path, const std::optional<std::string>& config_path);
nlohmann::json read_qwen2_5_vl_config(const std::string& path, const std::optional<std::string>& config_path);
// with_projection: a CLIPVisionModelWithProjection's file, whose visual_projection is left out (the
// pipelines read the tower's hidden states, never its projected image embedding).
ClipVisionCheckpoint read_clip_vision_checkpoint(const std::string& path, const std::optional<std::string>& config_path,
                                                 bool with_projection = false);

// Qwen2_5_VLForConditionalGeneration's language model: the released files' model.* tensors, or transformers
// 5's in-memory names (model.language_model.*) read as those; visual.* and lm_head.* are left out.
Qwen2_5_VLCheckpoint read_qwen2_5_vl_checkpoint(const std::string& path, const std::optional<std::string>& config_path);

// Models with the checkpoint's weights bound. Matrices are kept in bf16 when the checkpoint holds
// bf16 ones or `options` asks for bf16, else f32; tensors already in that dtype are shared.
std::unique_ptr<T5EncoderModel> load_t5(const T5Checkpoint& checkpoint, const nn::LoadOptions& options = {});
std::unique_ptr<CLIPTextModel> load_clip_text(const ClipTextCheckpoint& checkpoint,
                                              const nn::LoadOptions& options = {});
std::unique_ptr<Qwen2_5_VLTextModel> load_qwen2_5_vl(const Qwen2_5_VLCheckpoint& checkpoint,
                                                     const nn::LoadOptions& options = {});
std::unique_ptr<CLIPVisionModel> load_clip_vision(const ClipVisionCheckpoint& checkpoint,
                                                  const nn::LoadOptions& options = {});

}  // namespace cpdit::models::text
