#pragma once
// Small tokenizers built into the binary, for the presets' seeded random text encoders, so a preset
// goes from a prompt to a picture with no download:
//   CLIP: byte-level BPE over GPT-2's 256 byte symbols, each alone and closing a word ("</w>"), no
//     merges (every character is a token), then <|startoftext|> and <|endoftext|> as the last two ids
//     (so CLIP's legacy pooling rule, the argmax of the ids, finds the end of the text).
//   Qwen2: byte-level BPE over the 256 byte symbols with no merges (every byte is a token), Qwen2's
//     pre-tokeniser pattern, and the chat and vision tokens (<|endoftext|>, <|im_start|>, <|im_end|>, ...)
//     after them, so the Qwen-Image template tokenises as it does with Qwen's own vocabulary.
//   T5 / UMT5: a SentencePiece character model over printable ASCII, trained in memory by the
//     SentencePiece library when first asked for (pad 0, </s> 1, <unk> 2, as T5's).
#include <cpdit/tokenizers/tokenizer.hpp>

#include <cstdint>
#include <memory>

namespace cpdit::tokenizers {

constexpr int64_t kBuiltinClipVocabSize = 2 * 256 + 2;
std::unique_ptr<Tokenizer> builtin_clip_tokenizer();

// Qwen2's pre-tokeniser pattern (transformers' PRETOKENIZE_REGEX for Qwen2).
inline constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr int64_t kBuiltinQwen2VocabSize = 256 + 7;
std::unique_ptr<Tokenizer> builtin_qwen2_tokenizer();

// The built-in SentencePiece model's ids are below this (its pieces and the three special ones).
constexpr int64_t kBuiltinSentencePieceVocabSize = 128;
std::unique_ptr<Tokenizer> builtin_sentencepiece_tokenizer();

}  // namespace cpdit::tokenizers
