#pragma once
// Text encoders from one file with no config.json, as ComfyUI and stable-diffusion.cpp users hold them
// (t5xxl_fp16.safetensors, umt5_xxl_*.safetensors, clip_l.safetensors): the tensors in transformers'
// names, with or without the `encoder.` / `text_model.` prefix, and the config read from their shapes.
// What shapes do not tell is the releases': T5 v1.1 and UMT5 (gated GELU, relative positions up to 128,
// eps 1e-6), CLIP ViT-L/14's text tower (12 heads, quick GELU, the legacy end-of-text rule) and
// Qwen2.5-VL-7B's language model (28 heads of 128, RoPE theta 1e6, RMSNorm eps 1e-6).
#include <cpdit/nn/load.hpp>

#include <nlohmann/json.hpp>

#include <string>

namespace cpdit::models::text {

// A T5 / UMT5 encoder's tensors with `encoder.` before the blocks and the final norm (files written
// from the encoder stack alone lack it).
nn::StateDict t5_in_transformers_names(nn::StateDict state);

// The config.json of a T5 / UMT5 encoder whose tensors (transformers' names, the embedding as
// encoder.embed_tokens.weight) are `state`; refused in one line naming `source` when a size is missing.
nlohmann::json t5_config_from_shapes(const nn::StateDict& state, const std::string& source);

// The config.json of Qwen2.5-VL's language model (names model.*, as the checkpoint reader keeps them):
// Qwen2.5-VL-7B-Instruct's when its shapes are (Qwen-Image's text encoder; ComfyUI's
// qwen_2.5_vl_7b*.safetensors), else refused asking for the config (the head count is not in the shapes).
nlohmann::json qwen2_5_vl_config_from_shapes(const nn::StateDict& state, const std::string& source);

// The config.json of a CLIP text tower (names without `text_model.`): CLIP ViT-L/14's when its shapes
// are, else refused asking for the config (the head count is not in the shapes).
nlohmann::json clip_text_config_from_shapes(const nn::StateDict& state, const std::string& source);

}  // namespace cpdit::models::text
