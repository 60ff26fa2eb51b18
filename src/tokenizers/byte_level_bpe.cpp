#include "bpe.hpp"
#include "byte_level.hpp"
#include "unicode_text.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/tokenizers/byte_level_bpe.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>

namespace cpdit::tokenizers {

namespace {

// GPT-2's pattern: the ByteLevel pre-tokeniser's own split when it is given use_regex true.
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

const nlohmann::json& field(const nlohmann::json& j, const char* name, const std::string& where) {
  CPDIT_CHECK(j.is_object() && j.contains(name), format, where, ": no \"", name, "\"");
  return j[name];
}

// A string field that must be `wanted` (or null / missing when `wanted` is empty).
void check_string(const nlohmann::json& j, const char* name, const std::string& wanted, const std::string& where) {
  if (!j.contains(name) || j[name].is_null()) {
    CPDIT_CHECK(wanted.empty(), format, where, ": no \"", name, "\"");
    return;
  }
  CPDIT_CHECK(j[name].is_string() && j[name].get<std::string>() == wanted, unsupported, where, ": \"", name, "\" ",
              j[name].dump(), " is not supported (only ", wanted.empty() ? "\"\"" : "\"" + wanted + "\"", ")");
}

bool flag(const nlohmann::json& j, const char* name, const std::string& where) {
  if (!j.contains(name) || j[name].is_null()) return false;
  CPDIT_CHECK(j[name].is_boolean(), format, where, ": \"", name, "\" is not true or false");
  return j[name].get<bool>();
}

// The pattern of the pre-tokeniser: Sequence[Split(Regex, Isolated), ByteLevel(use_regex false)], or a
// ByteLevel alone with use_regex (GPT-2's pattern).
std::string split_pattern(const nlohmann::json& pre, const std::string& where) {
  auto byte_level = [&](const nlohmann::json& b, bool alone) {
    CPDIT_CHECK(b.is_object() && b.value("type", "") == "ByteLevel", unsupported, where,
                ": the pre-tokeniser must end in ByteLevel");
    CPDIT_CHECK(!flag(b, "add_prefix_space", where), unsupported, where,
                ": ByteLevel add_prefix_space true is not supported");
    CPDIT_CHECK(flag(b, "use_regex", where) == alone, unsupported, where, ": ByteLevel use_regex ",
                alone ? "false with no Split before it" : "true after a Split", " is not supported");
  };
  CPDIT_CHECK(pre.is_object() && field(pre, "type", where).is_string(), format, where, ": pre_tokenizer has no type");
  const std::string type = pre["type"].get<std::string>();
  if (type == "ByteLevel") {
    byte_level(pre, true);
    return kGpt2Pattern;
  }
  CPDIT_CHECK(type == "Sequence", unsupported, where, ": pre-tokenizer type \"", type,
              "\" is not supported (byte-level BPE takes Split + ByteLevel, or ByteLevel)");
  const nlohmann::json& list = field(pre, "pretokenizers", where);
  CPDIT_CHECK(list.is_array() && list.size() == 2, unsupported, where,
              ": the pre-tokenizer Sequence must be [Split, ByteLevel]");
  const nlohmann::json& split = list[0];
  CPDIT_CHECK(split.is_object() && split.value("type", "") == "Split", unsupported, where,
              ": pre-tokenizer type ", split.is_object() && split.contains("type") ? split["type"].dump() : "(none)",
              " is not supported (byte-level BPE takes Split + ByteLevel, or ByteLevel)");
  check_string(split, "behavior", "Isolated", where + " Split");
  CPDIT_CHECK(!flag(split, "invert", where), unsupported, where, ": Split invert true is not supported");
  const nlohmann::json& pattern = field(split, "pattern", where + " Split");
  CPDIT_CHECK(pattern.is_object() && pattern.contains("Regex") && pattern["Regex"].is_string(), unsupported, where,
              ": Split takes a {\"Regex\": pattern} (a plain String pattern is not supported)");
  byte_level(list[1], false);
  return pattern["Regex"].get<std::string>();
}

}  // namespace

std::unique_ptr<ByteLevelBpe> ByteLevelBpe::load(const std::string& folder) {
  return load(folder, io::read_json((std::filesystem::path(folder) / "tokenizer.json").string()));
}

std::unique_ptr<ByteLevelBpe> ByteLevelBpe::load(const std::string& folder, const nlohmann::json& tokenizer_json) {
  const std::filesystem::path config = std::filesystem::path(folder) / "tokenizer_config.json";
  return build(tokenizer_json, std::filesystem::exists(config) ? io::read_text(config.string()) : std::string(),
               folder);
}

std::unique_ptr<ByteLevelBpe> ByteLevelBpe::parse(std::string_view tokenizer_json, std::string_view config_json,
                                                  const std::string& source) {
  return build(io::parse_json(tokenizer_json, source + "/tokenizer.json"), config_json, source);
}

std::unique_ptr<ByteLevelBpe> ByteLevelBpe::build(const nlohmann::json& j, std::string_view config_json,
                                                  const std::string& source) {
  const std::string where = source + "/tokenizer.json";
  CPDIT_CHECK(j.is_object(), format, where, ": not a JSON object");
  std::unique_ptr<ByteLevelBpe> t(new ByteLevelBpe());

  const nlohmann::json& model = field(j, "model", where);
  check_string(model, "type", "BPE", where + " model");
  check_string(model, "continuing_subword_prefix", "", where + " model");
  check_string(model, "end_of_word_suffix", "", where + " model");
  CPDIT_CHECK(!flag(model, "byte_fallback", where), unsupported, where, ": BPE byte_fallback is not supported");
  CPDIT_CHECK(!model.contains("dropout") || model["dropout"].is_null(), unsupported, where,
              ": BPE dropout is not supported (tokenisation would not be deterministic)");
  t->ignore_merges_ = flag(model, "ignore_merges", where);
  t->vocab_ = parse_vocab(field(model, "vocab", where), where + " model.vocab");
  const nlohmann::json& merges = field(model, "merges", where);
  CPDIT_CHECK(merges.is_array(), format, where, ": model.merges is not a list");
  auto bpe = std::make_shared<BpeMerges>();
  for (size_t i = 0; i < merges.size(); ++i) {
    const nlohmann::json& m = merges[i];
    const std::string at = where + " merge " + std::to_string(i);
    // "left right" (tokenizers before 0.20) or ["left", "right"].
    std::string left, right;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      CPDIT_CHECK(space != std::string::npos && space > 0 && space + 1 < s.size() &&
                      s.find(' ', space + 1) == std::string::npos,
                  format, at, ": expected two symbols separated by one space, got ", m.dump());
      left = s.substr(0, space), right = s.substr(space + 1);
    } else {
      CPDIT_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(), format, at,
                  ": expected a pair of symbols, got ", m.dump());
      left = m[0].get<std::string>(), right = m[1].get<std::string>();
    }
    bpe->add(t->vocab_, left, right, at);
  }
  t->merges_ = std::move(bpe);

  if (j.contains("normalizer") && !j["normalizer"].is_null()) {
    check_string(j["normalizer"], "type", "NFC", where + " normalizer");
    t->normalize_nfc_ = true;
  }
  t->split_ = std::make_shared<RegexSplit>(split_pattern(field(j, "pre_tokenizer", where), where), where);

  const auto& symbols = byte_symbols();
  for (int b = 0; b < 256; ++b) {
    auto it = t->vocab_.find(symbols[size_t(b)]);
    CPDIT_CHECK(it != t->vocab_.end(), format, where, ": the vocabulary lacks the byte symbol of byte ", b,
                " (a byte-level BPE holds all 256)");
    t->byte_ids_[size_t(b)] = it->second;
  }

  if (j.contains("added_tokens")) {
    const nlohmann::json& added = j["added_tokens"];
    CPDIT_CHECK(added.is_array(), format, where, ": added_tokens is not a list");
    for (const nlohmann::json& a : added) {
      CPDIT_CHECK(a.is_object() && a.contains("id") && a["id"].is_number_integer() && a["id"].get<int64_t>() >= 0 &&
                      a.contains("content") && a["content"].is_string() && !a["content"].get<std::string>().empty(),
                  format, where, ": an added token needs an id >= 0 and a non-empty content, got ", a.dump());
      const std::string content = a["content"].get<std::string>();
      for (const char* strip : {"lstrip", "rstrip", "single_word"})
        CPDIT_CHECK(!flag(a, strip, where), unsupported, where, ": added token ", content, " sets ", strip,
                    ", which is not supported");
      t->added_.push_back({content, a["id"].get<int64_t>()});
    }
    std::stable_sort(t->added_.begin(), t->added_.end(),
                     [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
  }

  nlohmann::json config = nlohmann::json::object();
  if (!config_json.empty()) {
    config = io::parse_json(config_json, source + "/tokenizer_config.json");
    CPDIT_CHECK(config.is_object(), format, source, "/tokenizer_config.json: not a JSON object");
  }
  // The pad token: tokenizer_config.json's, else Qwen2's <|endoftext|> when there is one, else id 0.
  const std::string pad = config_token(config, "pad_token", "<|endoftext|>", source + "/tokenizer_config.json");
  auto added = std::find_if(t->added_.begin(), t->added_.end(), [&](const AddedToken& a) { return a.content == pad; });
  auto in_vocab = t->vocab_.find(pad);
  t->pad_ = added != t->added_.end() ? added->id : in_vocab != t->vocab_.end() ? in_vocab->second : 0;
  if (config.contains("model_max_length") && config["model_max_length"].is_number_integer()) {
    const int64_t n = config["model_max_length"].get<int64_t>();
    CPDIT_CHECK(n >= 1, format, source, "/tokenizer_config.json: model_max_length ", n, " is not positive");
    if (n <= 100'000'000) t->max_length_ = n;  // transformers writes a huge number for "no limit"
  }
  return t;
}

int64_t ByteLevelBpe::added_token_id(const std::string& content) const {
  for (const AddedToken& a : added_)
    if (a.content == content) return a.id;
  fail(ErrorKind::invalid_argument, "the tokenizer has no added token ", content);
}

void ByteLevelBpe::encode_text(const std::string& text, std::vector<int64_t>& ids) const {
  if (text.empty()) return;
  const icu::UnicodeString unicode = from_utf8(text);
  std::vector<int64_t> word;
  for (const std::string& piece : split_->split(normalize_nfc_ ? nfc(unicode) : unicode, /*keep_gaps=*/true)) {
    if (ignore_merges_) {
      std::string symbols;
      for (char c : piece) symbols += byte_symbols()[static_cast<unsigned char>(c)];
      auto whole = vocab_.find(symbols);
      if (whole != vocab_.end()) {
        ids.push_back(whole->second);
        continue;
      }
    }
    word.clear();
    for (char c : piece) word.push_back(byte_ids_[static_cast<unsigned char>(c)]);
    merges_->apply(word);
    ids.insert(ids.end(), word.begin(), word.end());
  }
}

std::vector<int64_t> ByteLevelBpe::encode(const std::string& text, int64_t max_length) const {
  CPDIT_CHECK(max_length >= 0, invalid_argument, "max length must not be negative, got ", max_length);
  std::vector<int64_t> ids;
  // Where each added token next occurs from `start` on (npos: nowhere), found again only once passed.
  std::vector<size_t> next;
  for (const AddedToken& a : added_) next.push_back(text.find(a.content));
  size_t start = 0;
  while (start <= text.size()) {
    size_t at = std::string::npos;
    const AddedToken* token = nullptr;
    for (size_t i = 0; i < added_.size(); ++i) {
      if (next[i] != std::string::npos && next[i] < start) next[i] = text.find(added_[i].content, start);
      if (next[i] < at) at = next[i], token = &added_[i];  // longest first: a tie keeps the longer
    }
    encode_text(text.substr(start, at == std::string::npos ? std::string::npos : at - start), ids);
    if (token == nullptr) break;
    ids.push_back(token->id);
    start = at + token->content.size();
  }
  if (int64_t(ids.size()) > max_length) ids.resize(size_t(max_length));
  return ids;
}

}  // namespace cpdit::tokenizers
