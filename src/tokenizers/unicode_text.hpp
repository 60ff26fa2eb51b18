#pragma once
// The Unicode steps the byte-level tokenizers share, done with ICU: UTF-8 in and out, NFC, and the
// pre-tokenisers' regex split.
#include <unicode/regex.h>
#include <unicode/unistr.h>

#include <memory>
#include <string>
#include <vector>

namespace cpdit::tokenizers {

// `text` (refused unless valid UTF-8) as ICU's UTF-16 string.
icu::UnicodeString from_utf8(const std::string& text);
icu::UnicodeString nfc(const icu::UnicodeString& text);

// A pre-tokeniser's pattern, written in the regex dialect of the Rust tokenizers library (Oniguruma)
// and compiled by ICU. The two differ in \s: Oniguruma's is Unicode's White_Space (U+000B and U+0085
// included), ICU's is [\t\n\f\r\p{Z}], so \s and \S are rewritten to the property before compiling.
class RegexSplit {
 public:
  // `where` names the pattern's source when ICU refuses it.
  RegexSplit(const std::string& pattern, const std::string& where);
  // The UTF-8 pieces of `text`: each match, and with keep_gaps also the text between matches, in order
  // (tokenizers' Split with behavior "Isolated").
  std::vector<std::string> split(const icu::UnicodeString& text, bool keep_gaps) const;

 private:
  std::shared_ptr<const icu::RegexPattern> pattern_;
};

}  // namespace cpdit::tokenizers
