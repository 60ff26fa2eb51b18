#pragma once
// Text to token ids, exactly as the diffusers pipelines' tokenizers make them: CLIP's byte-level BPE
// (clip_bpe.hpp), Qwen2's byte-level BPE from a tokenizer.json (byte_level_bpe.hpp) and T5 / UMT5
// SentencePiece. A tokenizer folder is what a diffusers pipeline keeps
// in tokenizer/ or tokenizer_2/.
#include <cpdit/core/tensor.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cpdit::tokenizers {

// The three algorithms, as a text encoder's slot asks for one (CLIP, Qwen2.5-VL, T5 / UMT5).
enum class TokenizerKind { clip_bpe, byte_level_bpe, sentencepiece };
// "CLIP BPE (vocab.json + merges.txt)", ... for messages.
const char* describe(TokenizerKind kind);

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual TokenizerKind kind() const = 0;
  // The ids of `text` with the model's special tokens (CLIP: bos ... eos; T5: ... eos; Qwen2: none), the text
  // truncated so that at most max_length ids come back, the closing special token kept.
  virtual std::vector<int64_t> encode(const std::string& text, int64_t max_length) const = 0;
  virtual int64_t pad_id() const = 0;
  // tokenizer_config.json's model_max_length (CLIP 77, T5 512): the length a pipeline pads to by default.
  virtual int64_t model_max_length() const = 0;
};

// Reads a tokenizer folder: spiece.model is SentencePiece, a tokenizer.json holding a byte-level BPE
// (no "</w>" word ends) is ByteLevelBpe, vocab.json + merges.txt is CLIP BPE. Anything else (e.g. a T5
// tokenizer.json alone) is refused with one line naming the file that is missing.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& folder);

// input_ids and attention_mask, both I64 (N, L).
struct TokenBatch {
  Tensor input_ids;
  Tensor attention_mask;
};

// transformers' `padding`: "max_length" pads every row to max_length, True ("longest") to the longest row.
enum class Padding { max_length, longest };

// As `tokenizer(texts, padding=..., max_length=L, truncation=True)`: every row truncated to max_length
// ids and padded with pad_id() on the right; the mask is 1 on real tokens, 0 on padding.
TokenBatch tokenize(const Tokenizer& tokenizer, const std::vector<std::string>& texts, int64_t max_length,
                    Padding padding = Padding::max_length);

}  // namespace cpdit::tokenizers
