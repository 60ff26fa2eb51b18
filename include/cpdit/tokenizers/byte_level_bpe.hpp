#pragma once
// A byte-level BPE tokenizer read from a Hugging Face tokenizer.json, as the Rust tokenizers library
// runs it (Qwen2's tokenizer, Qwen2TokenizerFast in transformers):
//   1. added tokens (<|im_start|>, <|image_pad|>, ...) found in the raw text, leftmost and longest
//      first; each is its own id and is never normalised or split;
//   2. between them: NFC (the "NFC" normaliser), the pre-tokeniser's regex split (Split, "Isolated":
//      matches and the gaps between them are pieces), each piece's UTF-8 bytes as GPT-2's byte symbols;
//   3. BPE over each piece with the model's ranked merges.
// No bos/eos is added (Qwen2's post-processor adds none); encode truncates on the right.
#include <cpdit/tokenizers/tokenizer.hpp>

#include <nlohmann/json_fwd.hpp>

#include <array>
#include <string_view>
#include <unordered_map>

namespace cpdit::tokenizers {

class BpeMerges;
class RegexSplit;

class ByteLevelBpe : public Tokenizer {
 public:
  // tokenizer.json and, when present, tokenizer_config.json (pad token, model_max_length) of `folder`.
  static std::unique_ptr<ByteLevelBpe> load(const std::string& folder);
  // The same with tokenizer.json already read (load_tokenizer reads it to tell the kind).
  static std::unique_ptr<ByteLevelBpe> load(const std::string& folder, const nlohmann::json& tokenizer_json);
  // The same from the files' contents (an empty config_json means none); `source` names them in errors.
  // What the files hold beyond the steps above (another model or normaliser, a pre-tokeniser other than
  // a regex split followed by ByteLevel, byte fallback, an added token stripping its neighbours) is
  // refused with one line naming the field.
  static std::unique_ptr<ByteLevelBpe> parse(std::string_view tokenizer_json, std::string_view config_json,
                                             const std::string& source);

  std::vector<int64_t> encode(const std::string& text, int64_t max_length) const override;
  TokenizerKind kind() const override { return TokenizerKind::byte_level_bpe; }
  int64_t pad_id() const override { return pad_; }
  int64_t model_max_length() const override { return max_length_; }
  // The id of an added token by its text ("<|image_pad|>"); refused naming it when there is none.
  int64_t added_token_id(const std::string& content) const;

 private:
  struct AddedToken {
    std::string content;
    int64_t id;
  };
  ByteLevelBpe() = default;
  static std::unique_ptr<ByteLevelBpe> build(const nlohmann::json& tokenizer, std::string_view config_json,
                                             const std::string& source);
  void encode_text(const std::string& text, std::vector<int64_t>& ids) const;  // one stretch without added tokens

  std::unordered_map<std::string, int64_t> vocab_;
  std::shared_ptr<const BpeMerges> merges_;
  std::shared_ptr<const RegexSplit> split_;
  std::vector<AddedToken> added_;  // longest first
  std::array<int64_t, 256> byte_ids_{};
  bool normalize_nfc_ = false, ignore_merges_ = false;
  int64_t pad_ = 0, max_length_ = 131072;
};

}  // namespace cpdit::tokenizers
