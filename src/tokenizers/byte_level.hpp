#pragma once
// GPT-2's byte-level alphabet, which CLIP's vocabulary is written in: every byte maps to one
// printable Unicode character, so BPE symbols are strings of those characters.
#include <array>
#include <string>

namespace cpdit::tokenizers {

// The UTF-8 encoding of the character standing for each byte value.
const std::array<std::string, 256>& byte_symbols();

}  // namespace cpdit::tokenizers
