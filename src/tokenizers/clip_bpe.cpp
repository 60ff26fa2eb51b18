#include "byte_level.hpp"
#include "clip_text.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/tokenizers/clip_bpe.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <limits>

namespace cpdit::tokenizers {

namespace {

constexpr std::string_view kEndOfWord = "</w>";

uint64_t pair_key(int64_t left, int64_t right) { return uint64_t(left) << 32 | uint64_t(right); }

std::unordered_map<std::string, int64_t> parse_vocab(std::string_view text, const std::string& source) {
  const nlohmann::json j = io::parse_json(text, source + "/vocab.json");
  CPDIT_CHECK(j.is_object() && !j.empty(), format, source, "/vocab.json: not a JSON object of token -> id");
  std::unordered_map<std::string, int64_t> vocab;
  for (const auto& [token, id] : j.items()) {
    // Ids below 2^31 keep a (left, right) pair in one 64-bit key.
    CPDIT_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < (int64_t(1) << 31), format,
                source, "/vocab.json: the id of token '", token, "' is not an integer in [0, 2^31)");
    vocab.emplace(token, id.get<int64_t>());
  }
  return vocab;
}

// A special token's text from tokenizer_config.json: a string or {"content": string}; else `fallback`.
std::string special_token(const nlohmann::json& config, const char* name, const std::string& fallback,
                          const std::string& source) {
  if (!config.contains(name) || config[name].is_null()) return fallback;
  const nlohmann::json& v = config[name];
  if (v.is_string()) return v.get<std::string>();
  CPDIT_CHECK(v.is_object() && v.contains("content") && v["content"].is_string(), format, source,
              "/tokenizer_config.json: ", name, " is neither a string nor {\"content\": string}");
  return v["content"].get<std::string>();
}

}  // namespace

std::unique_ptr<ClipBpe> ClipBpe::load(const std::string& folder) {
  const std::filesystem::path dir(folder);
  const std::string config = std::filesystem::exists(dir / "tokenizer_config.json")
                                 ? io::read_text((dir / "tokenizer_config.json").string())
                                 : std::string();
  return parse(io::read_text((dir / "vocab.json").string()), io::read_text((dir / "merges.txt").string()), config,
               folder);
}

std::unique_ptr<ClipBpe> ClipBpe::parse(std::string_view vocab_json, std::string_view merges_txt,
                                        std::string_view config_json, const std::string& source) {
  std::unique_ptr<ClipBpe> t(new ClipBpe());
  t->vocab_ = parse_vocab(vocab_json, source);
  auto id_of = [&](const std::string& token, const char* file, const char* role) {
    auto it = t->vocab_.find(token);
    CPDIT_CHECK(it != t->vocab_.end(), format, source, "/", file, ": ", role, " '", token, "' is not in vocab.json");
    return it->second;
  };

  // merges.txt: an optional "#version" line, then one "left right" pair per line, best first.
  size_t line_no = 0, start = 0;
  while (start < merges_txt.size()) {
    size_t end = merges_txt.find('\n', start);
    if (end == std::string_view::npos) end = merges_txt.size();
    std::string_view line = merges_txt.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t space = line.find(' ');
    CPDIT_CHECK(space != std::string_view::npos && space > 0 && space + 1 < line.size() &&
                    line.find(' ', space + 1) == std::string_view::npos,
                format, source, "/merges.txt line ", line_no, ": expected two symbols separated by one space");
    const std::string left(line.substr(0, space)), right(line.substr(space + 1));
    const int64_t merged = id_of(left + right, "merges.txt", "merged symbol");
    // A pair listed twice keeps its first (best) rank, as the Rust tokenizer does.
    t->merges_.try_emplace(pair_key(id_of(left, "merges.txt", "symbol"), id_of(right, "merges.txt", "symbol")),
                           Merge{int64_t(t->merges_.size()), merged});
  }

  nlohmann::json config = nlohmann::json::object();
  if (!config_json.empty()) {
    config = io::parse_json(config_json, source + "/tokenizer_config.json");
    CPDIT_CHECK(config.is_object(), format, source, "/tokenizer_config.json: not a JSON object");
  }
  t->bos_text_ = special_token(config, "bos_token", "<|startoftext|>", source);
  t->eos_text_ = special_token(config, "eos_token", "<|endoftext|>", source);
  CPDIT_CHECK(!t->bos_text_.empty() && !t->eos_text_.empty(), format, source,
              "/tokenizer_config.json: bos_token and eos_token must not be empty");
  t->bos_ = id_of(t->bos_text_, "tokenizer_config.json", "bos_token");
  t->eos_ = id_of(t->eos_text_, "tokenizer_config.json", "eos_token");
  t->pad_ = id_of(special_token(config, "pad_token", t->eos_text_, source), "tokenizer_config.json", "pad_token");
  t->unk_ = id_of(special_token(config, "unk_token", t->eos_text_, source), "tokenizer_config.json", "unk_token");
  // Configs without a real limit write a huge number (transformers' VERY_LARGE_INTEGER): keep CLIP's 77.
  if (config.contains("model_max_length") && config["model_max_length"].is_number_integer()) {
    const int64_t n = config["model_max_length"].get<int64_t>();
    CPDIT_CHECK(n >= 2, format, source, "/tokenizer_config.json: model_max_length ", n, " cannot hold bos and eos");
    if (n <= 1'000'000) t->max_length_ = n;
  }

  const auto& symbols = byte_symbols();
  for (int b = 0; b < 256; ++b) {
    auto alone = t->vocab_.find(symbols[b]);
    auto last = t->vocab_.find(symbols[b] + std::string(kEndOfWord));
    t->byte_ids_[b] = alone == t->vocab_.end() ? t->unk_ : alone->second;
    t->last_byte_ids_[b] = last == t->vocab_.end() ? t->unk_ : last->second;
  }
  return t;
}

void ClipBpe::encode_piece(std::string_view piece, std::vector<int64_t>& ids) const {
  std::vector<int64_t> word;
  for (size_t i = 0; i < piece.size(); ++i) {
    const auto b = static_cast<unsigned char>(piece[i]);
    word.push_back(i + 1 == piece.size() ? last_byte_ids_[b] : byte_ids_[b]);
  }
  // Merge the best-ranked adjacent pair until none is in merges.txt; equal pairs merge left first.
  while (word.size() > 1) {
    int64_t best_rank = std::numeric_limits<int64_t>::max(), merged = 0;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      auto it = merges_.find(pair_key(word[i], word[i + 1]));
      if (it != merges_.end() && it->second.rank < best_rank) {
        best_rank = it->second.rank;
        merged = it->second.merged;
      }
    }
    if (best_rank == std::numeric_limits<int64_t>::max()) break;
    std::vector<int64_t> next;
    for (size_t i = 0; i < word.size(); ++i) {
      auto it = i + 1 < word.size() ? merges_.find(pair_key(word[i], word[i + 1])) : merges_.end();
      if (it != merges_.end() && it->second.rank == best_rank) {
        next.push_back(merged);
        ++i;
      } else {
        next.push_back(word[i]);
      }
    }
    word = std::move(next);
  }
  ids.insert(ids.end(), word.begin(), word.end());
}

std::vector<int64_t> ClipBpe::encode(const std::string& text, int64_t max_length) const {
  CPDIT_CHECK(max_length >= 2, invalid_argument, "CLIP max length must be at least 2 (bos and eos), got ", max_length);
  std::vector<int64_t> ids{bos_};
  // The special tokens' own text in a prompt stands for them (the Rust tokenizer matches added
  // tokens before normalising); the text between them is tokenised as usual.
  size_t start = 0;
  while (start <= text.size()) {
    size_t bos_at = text.find(bos_text_, start), eos_at = text.find(eos_text_, start);
    const size_t at = std::min(bos_at, eos_at);
    for (const std::string& piece :
         clip_pieces(text.substr(start, at == std::string::npos ? std::string::npos : at - start)))
      encode_piece(piece, ids);
    if (at == std::string::npos) break;
    ids.push_back(at == bos_at ? bos_ : eos_);
    start = at + (at == bos_at ? bos_text_ : eos_text_).size();
  }
  if (int64_t(ids.size()) > max_length - 1) ids.resize(size_t(max_length - 1));
  ids.push_back(eos_);
  return ids;
}

}  // namespace cpdit::tokenizers
