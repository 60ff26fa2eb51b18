#include "clip_text.hpp"
#include "utf8.hpp"

#include <cpdit/core/error.hpp>

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/ustring.h>

#include <memory>

namespace cpdit::tokenizers {

namespace {

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

const icu::RegexPattern& clip_pattern() {
  static const std::unique_ptr<icu::RegexPattern> pattern = [] {
    UErrorCode status = U_ZERO_ERROR;
    UParseError where;
    std::unique_ptr<icu::RegexPattern> p(icu::RegexPattern::compile(
        icu::UnicodeString::fromUTF8(R"('s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+)"), 0, where,
        status));
    CPDIT_CHECK(U_SUCCESS(status), internal, "CLIP pattern does not compile in ICU: ", u_errorName(status));
    return p;
  }();
  return *pattern;
}

}  // namespace

std::vector<std::string> clip_pieces(const std::string& text) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
  CPDIT_CHECK(U_SUCCESS(status), internal, "ICU has no NFC normaliser: ", u_errorName(status));
  const icu::UnicodeString normal = lower_each(nfc->normalize(from_utf8(text), status));
  CPDIT_CHECK(U_SUCCESS(status), internal, "ICU NFC failed: ", u_errorName(status));

  std::unique_ptr<icu::RegexMatcher> matcher(clip_pattern().matcher(normal, status));
  CPDIT_CHECK(U_SUCCESS(status), internal, "ICU matcher failed: ", u_errorName(status));
  std::vector<std::string> pieces;
  while (matcher->find(status) && U_SUCCESS(status)) {
    std::string piece;
    matcher->group(status).toUTF8String(piece);
    pieces.push_back(std::move(piece));
  }
  CPDIT_CHECK(U_SUCCESS(status), internal, "ICU regex failed: ", u_errorName(status));
  return pieces;
}

}  // namespace cpdit::tokenizers
