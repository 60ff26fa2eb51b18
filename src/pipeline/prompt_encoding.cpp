#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/models/registry.hpp>
#include <cpdit/pipeline/family.hpp>
#include <cpdit/pipeline/prompt_encoding.hpp>
#include <cpdit/tokenizers/tokenizer.hpp>

#include <cstring>
#include <filesystem>

namespace cpdit::pipeline {

namespace fs = std::filesystem;

nn::TensorMap run_text_encoder(const TextComponents& c, const char* tokenizer, const char* encoder,
                               const std::string& text, int64_t max_length, bool pass_mask,
                               const nn::LoadOptions& load) {
  const tokenizers::TokenBatch batch = tokenizers::tokenize(*c.tokenizer(tokenizer), {text}, max_length);
  nn::TensorMap inputs{{"input_ids", batch.input_ids}};
  if (pass_mask) inputs["attention_mask"] = batch.attention_mask;
  nn::TensorMap out = c.encoder(encoder, load).replica()->forward(inputs);
  out["attention_mask"] = batch.attention_mask;
  return out;
}

std::string pipeline_class_of(const std::string& pipeline_dir) {
  const std::string path = (fs::path(pipeline_dir) / "model_index.json").string();
  const nlohmann::json index = io::read_json(path);
  CPDIT_CHECK(index.is_object() && index.contains("_class_name") && index["_class_name"].is_string(), format, path,
              ": no _class_name naming the pipeline");
  return index["_class_name"].get<std::string>();
}

std::string collapse_whitespace(const std::string& text) {
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  std::string out;
  bool gap = false;  // whitespace seen since the last kept character
  for (char c : text) {
    if (is_space(c)) {
      gap = true;
      continue;
    }
    if (gap && !out.empty()) out += ' ';
    gap = false;
    out += c;
  }
  return out;
}

TextComponents TextComponents::from_folder(const std::string& pipeline_dir) {
  const fs::path dir(pipeline_dir);
  TextComponents c;
  c.pipeline_class = pipeline_class_of(pipeline_dir);
  c.tokenizer = [dir](const std::string& component) { return tokenizers::load_tokenizer((dir / component).string()); };
  // The folder's config.json names the class (architectures); the registry opens it.
  c.encoder = [dir](const std::string& component, const nn::LoadOptions& load) {
    return models::open_model((dir / component).string(), std::nullopt, load);
  };
  return c;
}

bool TextComponents::folder_has_encoders(const std::string& pipeline_dir) {
  const fs::path dir(pipeline_dir);
  if (!fs::is_regular_file(dir / "model_index.json")) return false;
  for (const std::string& component : family_for_pipeline(pipeline_class_of(pipeline_dir)).text_components())
    if (!fs::is_directory(dir / component)) return false;
  return true;
}

nn::TensorMap encode_prompt(const TextComponents& components, const PromptEncoding& request) {
  CPDIT_CHECK(request.max_sequence_length >= 1, invalid_argument, "max sequence length must be positive, got ",
              request.max_sequence_length);
  return family_for_pipeline(components.pipeline_class).encode_prompt(components, request);
}

nn::TensorMap encode_prompt(const std::string& pipeline_dir, const PromptEncoding& request) {
  return encode_prompt(TextComponents::from_folder(pipeline_dir), request);
}

}  // namespace cpdit::pipeline
