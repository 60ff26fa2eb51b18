#pragma once
// T5 / UMT5 tokenizer: spiece.model through the SentencePiece library (the unigram model and its
// nmt_nfkc normalisation are the library's), then </s> appended, as transformers' T5Tokenizer does.
#include <cpdit/tokenizers/tokenizer.hpp>

#include <memory>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace cpdit::tokenizers {

class SentencePieceTokenizer : public Tokenizer {
 public:
  // spiece.model and (optional) tokenizer_config.json of `folder`.
  explicit SentencePieceTokenizer(const std::string& folder);
  // A model held in memory (the serialised ModelProto that spiece.model stores); `source` names it in errors.
  static std::unique_ptr<SentencePieceTokenizer> from_serialized(const std::string& proto, const std::string& source);
  ~SentencePieceTokenizer() override;

  std::vector<int64_t> encode(const std::string& text, int64_t max_length) const override;
  TokenizerKind kind() const override { return TokenizerKind::sentencepiece; }
  int64_t pad_id() const override { return pad_; }
  int64_t model_max_length() const override { return max_length_; }

 private:
  SentencePieceTokenizer();
  // Checks the loaded model and takes its special ids.
  void take_special_ids(const std::string& source);

  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  int64_t eos_ = 1, pad_ = 0, max_length_ = 512;
};

}  // namespace cpdit::tokenizers
