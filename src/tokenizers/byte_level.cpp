#include "byte_level.hpp"

namespace cpdit::tokenizers {

namespace {
std::string utf8(unsigned code) {  // code < 0x800 here
  if (code < 0x80) return std::string(1, char(code));
  return {char(0xC0 | (code >> 6)), char(0x80 | (code & 0x3F))};
}

// Printable Latin-1 bytes stand for themselves; the others (controls, space, soft hyphen...) take
// the characters from U+0100 on, in byte order.
std::array<std::string, 256> make_symbols() {
  std::array<std::string, 256> symbols;
  unsigned next = 256;
  for (unsigned b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    symbols[b] = utf8(printable ? b : next++);
  }
  return symbols;
}
}  // namespace

const std::array<std::string, 256>& byte_symbols() {
  static const std::array<std::string, 256> symbols = make_symbols();
  return symbols;
}

}  // namespace cpdit::tokenizers
