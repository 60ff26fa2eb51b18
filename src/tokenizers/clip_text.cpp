#include "clip_text.hpp"
#include "unicode_text.hpp"

#include <unicode/locid.h>

namespace cpdit::tokenizers {

namespace {

// Each code point lower-cased on its own (full mapping, no context), as the Rust tokenizer does
// with char::to_lowercase: a final capital sigma becomes σ, not ς.
icu::UnicodeString lower_each(const icu::UnicodeString& text) {
  icu::UnicodeString out;
  for (int32_t i = 0; i < text.length(); i = text.moveIndex32(i, 1)) {
    icu::UnicodeString one(text.char32At(i));
    out.append(one.toLower(icu::Locale::getRoot()));
  }
  return out;
}

const RegexSplit& clip_pattern() {
  static const RegexSplit pattern(R"('s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+)", "CLIP");
  return pattern;
}

}  // namespace

std::vector<std::string> clip_pieces(const std::string& text) {
  return clip_pattern().split(lower_each(nfc(from_utf8(text))), /*keep_gaps=*/false);
}

}  // namespace cpdit::tokenizers
