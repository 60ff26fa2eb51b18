#include "unicode_text.hpp"
#include "utf8.hpp"

#include <cpdit/core/error.hpp>

#include <unicode/normalizer2.h>
#include <unicode/ustring.h>

namespace cpdit::tokenizers {

icu::UnicodeString from_utf8(const std::string& text) {
  check_utf8(text);  // u_strFromUTF8 would report it too, without saying where
  UErrorCode status = U_ZERO_ERROR;
  int32_t length = 0;
  u_strFromUTF8(nullptr, 0, &length, text.data(), int32_t(text.size()), &status);
  CPDIT_CHECK(status == U_BUFFER_OVERFLOW_ERROR || U_SUCCESS(status), invalid_argument,
              "text to tokenise is not valid UTF-8");
  icu::UnicodeString out;
  status = U_ZERO_ERROR;
  u_strFromUTF8(out.getBuffer(length), length, nullptr, text.data(), int32_t(text.size()), &status);
  out.releaseBuffer(length);
  CPDIT_CHECK(U_SUCCESS(status), invalid_argument, "text to tokenise is not valid UTF-8");
  return out;
}

icu::UnicodeString nfc(const icu::UnicodeString& text) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = icu::Normalizer2::getNFCInstance(status);
  CPDIT_CHECK(U_SUCCESS(status), internal, "ICU has no NFC normaliser: ", u_errorName(status));
  icu::UnicodeString out = normalizer->normalize(text, status);
  CPDIT_CHECK(U_SUCCESS(status), internal, "ICU NFC failed: ", u_errorName(status));
  return out;
}

namespace {
// \s and \S as Unicode's White_Space; every other escape kept as written.
std::string icu_dialect(const std::string& pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '\\' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    const char next = pattern[++i];
    if (next == 's') out += "\\p{White_Space}";
    else if (next == 'S') out += "\\P{White_Space}";
    else out += {'\\', next};
  }
  return out;
}
}  // namespace

RegexSplit::RegexSplit(const std::string& pattern, const std::string& where) {
  UErrorCode status = U_ZERO_ERROR;
  UParseError at;
  pattern_.reset(icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(icu_dialect(pattern)), 0, at, status));
  CPDIT_CHECK(U_SUCCESS(status) && pattern_, format, where, ": the pre-tokeniser pattern does not compile (",
              u_errorName(status), " at offset ", at.offset, ")");
}

std::vector<std::string> RegexSplit::split(const icu::UnicodeString& text, bool keep_gaps) const {
  UErrorCode status = U_ZERO_ERROR;
  std::unique_ptr<icu::RegexMatcher> matcher(pattern_->matcher(text, status));
  CPDIT_CHECK(U_SUCCESS(status), internal, "ICU matcher failed: ", u_errorName(status));
  // A pattern from a downloaded tokenizer.json may backtrack without end ("(a+)+b"): ICU stops a match
  // after this many of its steps (roughly milliseconds), where a real pre-tokeniser needs microseconds.
  matcher->setTimeLimit(1000, status);
  std::vector<std::string> pieces;
  auto add = [&](int32_t from, int32_t to) {
    if (to <= from) return;
    std::string piece;
    text.tempSubStringBetween(from, to).toUTF8String(piece);
    pieces.push_back(std::move(piece));
  };
  int32_t done = 0;  // end of the last piece
  while (matcher->find(status) && U_SUCCESS(status)) {
    const int32_t start = matcher->start(status), end = matcher->end(status);
    if (keep_gaps) add(done, start);
    add(start, end);
    done = end;
  }
  CPDIT_CHECK(status != U_REGEX_TIME_OUT, invalid_argument,
              "the tokenizer's pre-tokeniser pattern ran past its time limit on this text (a pattern that backtracks)");
  CPDIT_CHECK(U_SUCCESS(status), internal, "ICU regex failed: ", u_errorName(status));
  if (keep_gaps) add(done, text.length());
  return pieces;
}

}  // namespace cpdit::tokenizers
