#include "sentencepiece.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/tokenizers/byte_level_bpe.hpp>
#include <cpdit/tokenizers/clip_bpe.hpp>

#include <nlohmann/json.hpp>
#include <cpdit/tokenizers/tokenizer.hpp>

#include <algorithm>
#include <filesystem>

namespace cpdit::tokenizers {

namespace {
// Whether tokenizer.json holds a byte-level BPE model (Qwen2's), not CLIP's (words end in "</w>") or
// a SentencePiece one (T5's Unigram).
bool holds_byte_level_bpe(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) return false;
  const nlohmann::json& model = j["model"];
  return model.value("type", "") == "BPE" &&
         (!model.contains("end_of_word_suffix") || !model["end_of_word_suffix"].is_string() ||
          model["end_of_word_suffix"].get<std::string>().empty());
}
}  // namespace

const char* describe(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::clip_bpe: return "a CLIP BPE tokenizer (vocab.json + merges.txt)";
    case TokenizerKind::byte_level_bpe: return "a byte-level BPE tokenizer.json (Qwen2)";
    case TokenizerKind::sentencepiece: return "a SentencePiece tokenizer (spiece.model: T5, UMT5)";
  }
  return "a tokenizer";
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& folder) {
  namespace fs = std::filesystem;
  const fs::path dir(folder);
  CPDIT_CHECK(fs::is_directory(dir), io, "tokenizer folder ", folder, " does not exist");
  if (fs::exists(dir / "spiece.model")) return std::make_unique<SentencePieceTokenizer>(folder);
  if (fs::exists(dir / "tokenizer.json")) {
    const nlohmann::json j = io::read_json((dir / "tokenizer.json").string());
    if (holds_byte_level_bpe(j)) return ByteLevelBpe::load(folder, j);
  }
  if (fs::exists(dir / "vocab.json") || fs::exists(dir / "merges.txt")) {
    for (const char* file : {"vocab.json", "merges.txt"})
      CPDIT_CHECK(fs::exists(dir / file), io, "CLIP tokenizer folder ", folder, " has no ", file);
    return ClipBpe::load(folder);
  }
  // T5 checkpoints on the Hub ship spiece.model beside tokenizer.json; cpdit reads only the former.
  CPDIT_CHECK(!fs::exists(dir / "tokenizer.json"), unsupported, "tokenizer folder ", folder,
              " has tokenizer.json but no spiece.model: T5/UMT5 tokenizers are read from spiece.model "
              "(copy it from the model's tokenizer_2/ folder)");
  fail(ErrorKind::io, "tokenizer folder ", folder,
       " has neither spiece.model (T5/UMT5), a byte-level BPE tokenizer.json (Qwen2) nor vocab.json + "
       "merges.txt (CLIP)");
}

TokenBatch tokenize(const Tokenizer& tokenizer, const std::vector<std::string>& texts, int64_t max_length,
                    Padding padding) {
  const int64_t n = int64_t(texts.size());
  std::vector<std::vector<int64_t>> rows;
  int64_t length = padding == Padding::max_length ? max_length : 0;
  for (const std::string& text : texts) {
    rows.push_back(tokenizer.encode(text, max_length));
    length = std::max(length, int64_t(rows.back().size()));
  }
  TokenBatch batch{Tensor::full({n, length}, double(tokenizer.pad_id()), DType::i64),
                   Tensor::zeros({n, length}, DType::i64)};
  int64_t* ids = batch.input_ids.data<int64_t>();
  int64_t* mask = batch.attention_mask.data<int64_t>();
  for (int64_t row = 0; row < n; ++row)
    for (size_t i = 0; i < rows[size_t(row)].size(); ++i) {
      ids[row * length + int64_t(i)] = rows[size_t(row)][i];
      mask[row * length + int64_t(i)] = 1;
    }
  return batch;
}

}  // namespace cpdit::tokenizers
