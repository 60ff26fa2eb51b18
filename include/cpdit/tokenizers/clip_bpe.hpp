#pragma once
// CLIP's tokenizer as transformers' CLIPTokenizer runs it: NFC, lower-casing, CLIP's split into
// contractions / letter runs / single digits / other-symbol runs (whitespace dropped), each piece's
// UTF-8 bytes mapped to GPT-2's byte characters, BPE with "</w>" closing the piece's last symbol,
// then <|startoftext|> ... <|endoftext|>.
#include <cpdit/tokenizers/tokenizer.hpp>

#include <array>
#include <string_view>
#include <unordered_map>

namespace cpdit::tokenizers {

class BpeMerges;

class ClipBpe : public Tokenizer {
 public:
  // vocab.json, merges.txt and tokenizer_config.json of `folder` (the config is optional).
  static std::unique_ptr<ClipBpe> load(const std::string& folder);
  // The same from the files' contents (an empty config_json means none); `source` names them in
  // errors. Malformed contents are refused with one line naming the file and the fault.
  static std::unique_ptr<ClipBpe> parse(std::string_view vocab_json, std::string_view merges_txt,
                                        std::string_view config_json, const std::string& source);

  std::vector<int64_t> encode(const std::string& text, int64_t max_length) const override;
  TokenizerKind kind() const override { return TokenizerKind::clip_bpe; }
  int64_t pad_id() const override { return pad_; }
  int64_t model_max_length() const override { return max_length_; }

 private:
  ClipBpe() = default;
  // Appends the BPE ids of one pre-tokenised piece (its UTF-8 bytes).
  void encode_piece(std::string_view piece, std::vector<int64_t>& ids) const;

  std::unordered_map<std::string, int64_t> vocab_;
  std::shared_ptr<const BpeMerges> merges_;  // merges.txt's, ranked by line
  std::array<int64_t, 256> byte_ids_{}, last_byte_ids_{};  // a byte's symbol alone / with "</w>"
  int64_t bos_ = 0, eos_ = 0, pad_ = 0, unk_ = 0, max_length_ = 77;
  std::string bos_text_, eos_text_;
};

}  // namespace cpdit::tokenizers
