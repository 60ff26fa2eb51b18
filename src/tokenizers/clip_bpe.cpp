#include "bpe.hpp"
#include "byte_level.hpp"
#include "clip_text.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/tokenizers/clip_bpe.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>

namespace cpdit::tokenizers {

namespace {

constexpr std::string_view kEndOfWord = "</w>";

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
  t->vocab_ = parse_vocab(io::parse_json(vocab_json, source + "/vocab.json"), source + "/vocab.json");
  auto id_of = [&](const std::string& token, const char* file, const char* role) {
    auto it = t->vocab_.find(token);
    CPDIT_CHECK(it != t->vocab_.end(), format, source, "/", file, ": ", role, " '", token, "' is not in vocab.json");
    return it->second;
  };

  // merges.txt: an optional "#version" line, then one "left right" pair per line, best first.
  auto merges = std::make_shared<BpeMerges>();
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
    merges->add(t->vocab_, std::string(line.substr(0, space)), std::string(line.substr(space + 1)),
                source + "/merges.txt line " + std::to_string(line_no));
  }
  t->merges_ = std::move(merges);

  nlohmann::json config = nlohmann::json::object();
  if (!config_json.empty()) {
    config = io::parse_json(config_json, source + "/tokenizer_config.json");
    CPDIT_CHECK(config.is_object(), format, source, "/tokenizer_config.json: not a JSON object");
  }
  const std::string config_file = source + "/tokenizer_config.json";
  t->bos_text_ = config_token(config, "bos_token", "<|startoftext|>", config_file);
  t->eos_text_ = config_token(config, "eos_token", "<|endoftext|>", config_file);
  CPDIT_CHECK(!t->bos_text_.empty() && !t->eos_text_.empty(), format, source,
              "/tokenizer_config.json: bos_token and eos_token must not be empty");
  t->bos_ = id_of(t->bos_text_, "tokenizer_config.json", "bos_token");
  t->eos_ = id_of(t->eos_text_, "tokenizer_config.json", "eos_token");
  t->pad_ = id_of(config_token(config, "pad_token", t->eos_text_, config_file), "tokenizer_config.json", "pad_token");
  t->unk_ = id_of(config_token(config, "unk_token", t->eos_text_, config_file), "tokenizer_config.json", "unk_token");
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
  merges_->apply(word);
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
