#pragma once
// Text a tokenizer takes is UTF-8, checked before it is split: every tokenizer refuses malformed text
// alike (ICU would substitute U+FFFD, SentencePiece would encode the bytes), naming the first bad byte.
#include <string>

namespace cpdit::tokenizers {

void check_utf8(const std::string& text);

}  // namespace cpdit::tokenizers
