#include "utf8.hpp"

#include <cpdit/core/error.hpp>

#include <unicode/utf8.h>

#include <cstdint>

namespace cpdit::tokenizers {

void check_utf8(const std::string& text) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  const int32_t length = int32_t(text.size());
  CPDIT_CHECK(text.size() <= size_t(INT32_MAX), invalid_argument, "text to tokenise is ", text.size(),
              " bytes: more than 2^31");
  for (int32_t at = 0; at < length;) {
    const int32_t start = at;
    UChar32 c;
    U8_NEXT(bytes, at, length, c);  // a negative c: an ill-formed sequence (ICU's definition, as Python's)
    CPDIT_CHECK(c >= 0, invalid_argument, "text to tokenise is not valid UTF-8 (byte ", start, ")");
  }
}

}  // namespace cpdit::tokenizers
