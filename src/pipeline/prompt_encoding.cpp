#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/models/registry.hpp>
#include <cpdit/pipeline/family.hpp>
#include <cpdit/pipeline/prompt_encoding.hpp>
#include <cpdit/tokenizers/tokenizer.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>

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
  for (const TextSlot& slot : family_for_pipeline(pipeline_class_of(pipeline_dir)).text_slots())
    if (!fs::is_directory(dir / slot.tokenizer) || !fs::is_directory(dir / slot.encoder)) return false;
  return true;
}

TextComponents TextComponents::with_files(const std::string& pipeline_dir, const std::string& pipeline_class,
                                          const std::vector<TextEncoderFile>& files,
                                          const std::vector<std::string>& tokenizer_dirs) {
  const std::vector<TextSlot> slots = family_for_pipeline(pipeline_class).text_slots();
  std::string classes;
  for (const TextSlot& slot : slots) classes += (classes.empty() ? "" : " and ") + slot.encoder_class;
  // Where each component comes from, by its component name.
  std::map<std::string, std::string> given;
  for (const TextEncoderFile& file : files) {
    CPDIT_CHECK(fs::is_regular_file(file.path), invalid_argument, file.flag, " ", file.path, " is not a file");
    const std::string found = models::model_class(file.path, std::nullopt, "text_encoder");
    CPDIT_CHECK(file.expected_class.empty() || found == file.expected_class, invalid_argument, file.flag, " ",
                file.path, " holds a ", found, ", not a ", file.expected_class);
    const auto slot = std::find_if(slots.begin(), slots.end(), [&](const TextSlot& s) { return s.encoder_class == found; });
    CPDIT_CHECK(slot != slots.end(), invalid_argument, file.flag, " ", file.path, " is a ", found, "; ", pipeline_class,
                " reads ", classes);
    CPDIT_CHECK(given.emplace(slot->encoder, file.path).second, invalid_argument, file.flag, " ", file.path, ": ",
                pipeline_class, "'s ", found, " is already given (", given[slot->encoder], ")");
  }
  for (const std::string& dir : tokenizer_dirs) {
    const tokenizers::TokenizerKind kind = tokenizers::load_tokenizer(dir)->kind();
    const auto slot = std::find_if(slots.begin(), slots.end(), [&](const TextSlot& s) { return s.tokenizer_kind == kind; });
    CPDIT_CHECK(slot != slots.end(), invalid_argument, "--tokenizer ", dir, " is ", tokenizers::describe(kind), "; ",
                pipeline_class, " reads none");
    CPDIT_CHECK(given.emplace(slot->tokenizer, dir).second, invalid_argument, "--tokenizer ", dir, ": ", pipeline_class,
                "'s ", slot->encoder_class, " tokenizer is already given (", given[slot->tokenizer], ")");
  }
  // What was not given comes from the pipeline folder, when there is one and it has it.
  const bool folder = !pipeline_dir.empty() && fs::is_regular_file(fs::path(pipeline_dir) / "model_index.json");
  for (const TextSlot& slot : slots) {
    for (const std::string* component : {&slot.encoder, &slot.tokenizer}) {
      if (given.count(*component)) continue;
      const fs::path inside = fs::path(pipeline_dir) / *component;
      if (folder && fs::is_directory(inside)) {
        given[*component] = inside.string();
        continue;
      }
      const bool encoder = component == &slot.encoder;
      fail(ErrorKind::invalid_argument, pipeline_class, " needs its ", slot.encoder_class,
           encoder ? "" : "'s tokenizer", " (", *component, "/ of its diffusers folder): give ",
           encoder ? slot.file_flag + " FILE" : std::string("--tokenizer DIR, ") + tokenizers::describe(slot.tokenizer_kind));
    }
  }
  TextComponents c;
  c.pipeline_class = pipeline_class;
  auto where = [given](const std::string& component) {
    const auto it = given.find(component);
    CPDIT_CHECK(it != given.end(), internal, "no text component '", component, "' was given");
    return it->second;
  };
  c.tokenizer = [where](const std::string& component) { return tokenizers::load_tokenizer(where(component)); };
  c.encoder = [where](const std::string& component, const nn::LoadOptions& load) {
    return models::open_model(where(component), std::nullopt, load, "text_encoder");
  };
  return c;
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
