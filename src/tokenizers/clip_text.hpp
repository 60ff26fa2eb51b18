#pragma once
// The text side of CLIP's tokenizer, before BPE (transformers' CLIP normaliser and pre-tokeniser):
// Unicode NFC, lower-casing code point by code point, then the pieces that CLIP's pattern
//   's|'t|'re|'ve|'m|'ll|'d|\p{L}+|\p{N}|[^\s\p{L}\p{N}]+
// matches, whitespace between them dropped. Done with ICU, so letter and number classes follow the
// Unicode tables.
#include <string>
#include <vector>

namespace cpdit::tokenizers {

// The UTF-8 pieces of `text` (which must be valid UTF-8: refused otherwise).
std::vector<std::string> clip_pieces(const std::string& text);

}  // namespace cpdit::tokenizers
