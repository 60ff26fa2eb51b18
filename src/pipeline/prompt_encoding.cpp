#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/models/registry.hpp>
#include <cpdit/pipeline/prompt_encoding.hpp>
#include <cpdit/tokenizers/tokenizer.hpp>

#include <cstring>
#include <filesystem>

namespace cpdit::pipeline {

namespace {

namespace fs = std::filesystem;

bool is_flux(const std::string& pipeline_class) { return pipeline_class.rfind("Flux", 0) == 0; }
bool is_ltx(const std::string& pipeline_class) { return pipeline_class.rfind("LTX", 0) == 0; }
bool is_wan(const std::string& pipeline_class) {
  return pipeline_class.rfind("Wan", 0) == 0 || pipeline_class.rfind("SkyReelsV2", 0) == 0;
}

// One encoder call on one tokenised text; the encoder is freed on return.
nn::TensorMap run_encoder(const TextComponents& c, const char* tokenizer, const char* encoder, const std::string& text,
                          int64_t max_length, bool pass_mask, const nn::LoadOptions& load) {
  const tokenizers::TokenBatch batch = tokenizers::tokenize(*c.tokenizer(tokenizer), {text}, max_length);
  nn::TensorMap inputs{{"input_ids", batch.input_ids}};
  if (pass_mask) inputs["attention_mask"] = batch.attention_mask;
  nn::TensorMap out = c.encoder(encoder, load).replica()->forward(inputs);
  out["attention_mask"] = batch.attention_mask;
  return out;
}

nn::TensorMap encode_flux(const TextComponents& c, const PromptEncoding& r) {
  nn::TensorMap out;
  auto encode = [&](const std::string& text, const std::string& prefix) {
    // CLIP always reads 77 tokens (its tokenizer's model_max_length); T5 the pipeline's length.
    out[prefix + "pooled_prompt_embeds"] =
        run_encoder(c, "tokenizer", "text_encoder", text, 77, false, r.load).at("pooler_output");
    out[prefix + "prompt_embeds"] =
        run_encoder(c, "tokenizer_2", "text_encoder_2", text, r.max_sequence_length, false, r.load)
            .at("last_hidden_state");
  };
  encode(r.prompt, "");
  if (r.negative_prompt) encode(*r.negative_prompt, "negative_");
  return out;
}

nn::TensorMap encode_wan(const TextComponents& c, const PromptEncoding& r) {
  nn::TensorMap out;
  auto encode = [&](const std::string& text) {
    nn::TensorMap o = run_encoder(c, "tokenizer", "text_encoder", collapse_whitespace(text), r.max_sequence_length,
                                  true, r.load);
    // The pipeline trims each row to its tokens and pads it back with zeros.
    Tensor h = o.at("last_hidden_state").contiguous();
    const int64_t len = h.size(1), width = h.size(2);
    const int64_t* mask = o.at("attention_mask").data<int64_t>();
    for (int64_t s = 0; s < len; ++s)
      if (mask[s] == 0) std::memset(h.data<float>() + s * width, 0, size_t(width) * sizeof(float));
    return h;
  };
  out["prompt_embeds"] = encode(r.prompt);
  out["negative_prompt_embeds"] = encode(r.negative_prompt.value_or(""));
  return out;
}

nn::TensorMap encode_ltx(const TextComponents& c, const PromptEncoding& r) {
  nn::TensorMap out;
  auto encode = [&](const std::string& text, const std::string& prefix) {
    // The encoder reads every position (no mask); the mask goes to the transformer.
    nn::TensorMap o = run_encoder(c, "tokenizer", "text_encoder", text, r.max_sequence_length, false, r.load);
    out[prefix + "prompt_embeds"] = o.at("last_hidden_state");
    out[prefix + "prompt_attention_mask"] = o.at("attention_mask");
  };
  encode(r.prompt, "");
  encode(r.negative_prompt.value_or(""), "negative_");
  return out;
}

std::string pipeline_class_of(const fs::path& dir) {
  const nlohmann::json index = io::read_json((dir / "model_index.json").string());
  CPDIT_CHECK(index.is_object() && index.contains("_class_name") && index["_class_name"].is_string(), format,
              (dir / "model_index.json").string(), ": no _class_name naming the pipeline");
  return index["_class_name"].get<std::string>();
}

}  // namespace

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
  c.pipeline_class = pipeline_class_of(dir);
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
  const std::string name = pipeline_class_of(dir);
  std::vector<const char*> needed{"tokenizer", "text_encoder"};
  if (is_flux(name)) needed = {"tokenizer", "text_encoder", "tokenizer_2", "text_encoder_2"};
  for (const char* component : needed)
    if (!fs::is_directory(dir / component)) return false;
  return true;
}

nn::TensorMap encode_prompt(const TextComponents& components, const PromptEncoding& request) {
  CPDIT_CHECK(request.max_sequence_length >= 1, invalid_argument, "max sequence length must be positive, got ",
              request.max_sequence_length);
  const std::string& name = components.pipeline_class;
  if (is_flux(name)) return encode_flux(components, request);
  if (is_wan(name)) return encode_wan(components, request);
  if (is_ltx(name)) return encode_ltx(components, request);
  fail(ErrorKind::unsupported, "encode-prompt: pipeline '", name,
       "' is not supported (FLUX.1: Flux*, Wan: Wan*, SkyReelsV2*, LTX-Video: LTX*)");
}

nn::TensorMap encode_prompt(const std::string& pipeline_dir, const PromptEncoding& request) {
  return encode_prompt(TextComponents::from_folder(pipeline_dir), request);
}

}  // namespace cpdit::pipeline
