#pragma once
// A prompt to the embeddings a diffusers pipeline's encode_prompt returns, from the pipeline's own
// folder (model_index.json, tokenizer/, text_encoder/, tokenizer_2/, text_encoder_2/):
//   FLUX.1 (FluxPipeline): prompt_embeds = T5 last_hidden_state over max_sequence_length tokens, no
//     attention mask; pooled_prompt_embeds = CLIP pooler_output over 77 tokens. A negative prompt
//     (true CFG) adds negative_prompt_embeds and negative_pooled_prompt_embeds.
//   Wan (WanPipeline, SkyReelsV2*): the prompt cleaned of surrounding and repeated whitespace, UMT5
//     over max_sequence_length tokens with the attention mask, the padded positions zeroed; the
//     negative prompt (default "") likewise, as classifier-free guidance needs it.
//   LTX-Video (LTXPipeline): T5 over max_sequence_length tokens (128 in the pipeline) without the
//     attention mask, the outputs kept whole; prompt_attention_mask (1, L) I64 for the transformer;
//     the negative prompt (default "") likewise.
// Each text encoder is loaded, run and released in turn, so only one is resident at a time.
#include <cpdit/models/registry.hpp>
#include <cpdit/nn/load.hpp>
#include <cpdit/nn/module.hpp>
#include <cpdit/tokenizers/tokenizer.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cpdit::pipeline {

struct PromptEncoding {
  std::string prompt;
  std::optional<std::string> negative_prompt;
  int64_t max_sequence_length = 512;  // FLUX.1-dev and Wan: 512; FLUX.1-schnell: 256
  nn::LoadOptions load;
};

// One of a pipeline's text encoders: its tokenizer's and its encoder's component names (the folders of
// a diffusers pipeline), the encoder's class and the tokenizer it reads, and the flag that names a
// single file of it.
struct TextSlot {
  std::string tokenizer, encoder;  // "tokenizer_2", "text_encoder_2"
  std::string encoder_class;       // "T5EncoderModel"
  tokenizers::TokenizerKind tokenizer_kind;
  std::string file_flag;           // "--t5xxl"
};

// A text encoder given as one file: the flag that named it and the class that flag asks for (empty:
// any, --text-encoder).
struct TextEncoderFile {
  std::string path;
  std::string flag = "--text-encoder";
  std::string expected_class;
};

// Where a pipeline's tokenizers and text encoders come from, by their component names (tokenizer,
// text_encoder, tokenizer_2, text_encoder_2): a pipeline folder's subfolders, or a preset's built-in
// ones. Each is made when asked for, so the caller holds one encoder at a time.
struct TextComponents {
  std::string pipeline_class;  // model_index.json's _class_name: FluxPipeline, WanPipeline, ...
  std::function<std::unique_ptr<tokenizers::Tokenizer>(const std::string& component)> tokenizer;
  std::function<models::LoadedModel(const std::string& component, const nn::LoadOptions& load)> encoder;

  // A diffusers pipeline folder (model_index.json names the pipeline).
  static TextComponents from_folder(const std::string& pipeline_dir);
  // Single files and tokenizer folders for the slots of `pipeline_class`'s family, the rest from
  // `pipeline_dir`'s folders (when it is a diffusers pipeline folder): each file in the slot of the class
  // its tensors name, each tokenizer folder in the slot whose encoder reads its kind. Every slot must
  // end with both (else a one-line error naming the flag to give), and none may be given twice.
  static TextComponents with_files(const std::string& pipeline_dir, const std::string& pipeline_class,
                                   const std::vector<TextEncoderFile>& files, const std::vector<std::string>& tokenizers);
  // True when the folder has the text encoders its pipeline needs.
  static bool folder_has_encoders(const std::string& pipeline_dir);
};

// The pipeline a diffusers folder holds: model_index.json's _class_name (FluxPipeline, WanPipeline, ...).
std::string pipeline_class_of(const std::string& pipeline_dir);

// One text through one tokenizer (max_length tokens, padded) and text encoder of `components`, by their
// component names; the encoder's outputs and the tokenizer's attention_mask. `pass_mask`: the encoder
// reads the mask (UMT5 in Wan), else every position.
nn::TensorMap run_text_encoder(const TextComponents& components, const char* tokenizer, const char* encoder,
                               const std::string& text, int64_t max_length, bool pass_mask,
                               const nn::LoadOptions& load);

// Names and (1, L, D) / (1, D) f32 tensors as the pipeline returns them: the family of
// components.pipeline_class encodes (family.hpp).
nn::TensorMap encode_prompt(const TextComponents& components, const PromptEncoding& request);
nn::TensorMap encode_prompt(const std::string& pipeline_dir, const PromptEncoding& request);

// Wan's prompt_clean without ftfy or HTML unescaping: whitespace runs become one space, ends trimmed.
std::string collapse_whitespace(const std::string& text);

}  // namespace cpdit::pipeline
