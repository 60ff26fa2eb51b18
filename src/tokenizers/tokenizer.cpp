#include "sentencepiece.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/tokenizers/clip_bpe.hpp>
#include <cpdit/tokenizers/tokenizer.hpp>

#include <filesystem>

namespace cpdit::tokenizers {

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& folder) {
  namespace fs = std::filesystem;
  const fs::path dir(folder);
  CPDIT_CHECK(fs::is_directory(dir), io, "tokenizer folder ", folder, " does not exist");
  if (fs::exists(dir / "spiece.model")) return std::make_unique<SentencePieceTokenizer>(folder);
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
       " has neither spiece.model (T5/UMT5) nor vocab.json + merges.txt (CLIP)");
}

TokenBatch tokenize(const Tokenizer& tokenizer, const std::vector<std::string>& texts, int64_t max_length) {
  const int64_t n = int64_t(texts.size());
  TokenBatch batch{Tensor::full({n, max_length}, double(tokenizer.pad_id()), DType::i64),
                   Tensor::zeros({n, max_length}, DType::i64)};
  int64_t* ids = batch.input_ids.data<int64_t>();
  int64_t* mask = batch.attention_mask.data<int64_t>();
  for (int64_t row = 0; row < n; ++row) {
    const std::vector<int64_t> row_ids = tokenizer.encode(texts[size_t(row)], max_length);
    for (size_t i = 0; i < row_ids.size(); ++i) {
      ids[row * max_length + int64_t(i)] = row_ids[i];
      mask[row * max_length + int64_t(i)] = 1;
    }
  }
  return batch;
}

}  // namespace cpdit::tokenizers
