// libFuzzer entry: the tokenizers' files must either load or be refused with cpdit::Error, and a
// tokenizer that loads must encode any text (or refuse it, e.g. invalid UTF-8) within bounds. One
// input split at NUL bytes into three parts is read both ways:
//   CLIP BPE:        vocab.json, merges.txt, tokenizer_config.json;
//   byte-level BPE:  tokenizer.json (the first part), tokenizer_config.json (the third).
#include <cpdit/core/error.hpp>
#include <cpdit/tokenizers/byte_level_bpe.hpp>
#include <cpdit/tokenizers/clip_bpe.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace {

// Encodes fixed text and `extra` (a part of the input: arbitrary bytes) with at most `max_length` ids;
// at least `at_least` ids must come back for text that encodes.
void encode_within_bounds(const cpdit::tokenizers::Tokenizer& t, std::string_view extra, int64_t max_length,
                          size_t at_least) {
  for (std::string_view text : {std::string_view("a photo of a cat's 3 dogs!! <|endoftext|>\n\t"), extra}) {
    try {
      const auto ids = t.encode(std::string(text), max_length);
      if (ids.size() > size_t(max_length) || ids.size() < at_least) __builtin_trap();
    } catch (const cpdit::Error&) {
      // text that is not UTF-8, or a pattern past its time limit: refused, fine
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t first = input.find('\0');
  const size_t second = first == std::string_view::npos ? first : input.find('\0', first + 1);
  const std::string_view head = input.substr(0, first);
  const std::string_view middle = first == std::string_view::npos ? "" : input.substr(first + 1, second - first - 1);
  const std::string_view config = second == std::string_view::npos ? "" : input.substr(second + 1);
  try {
    auto clip = cpdit::tokenizers::ClipBpe::parse(head, middle, config, "fuzz input");
    encode_within_bounds(*clip, middle, 77, 2);  // truncation promises at most 77, bos + eos at least
  } catch (const cpdit::Error&) {
    // malformed files refused with a message: the expected outcome for most inputs
  }
  try {
    auto bpe = cpdit::tokenizers::ByteLevelBpe::parse(head, config, "fuzz input");
    encode_within_bounds(*bpe, middle, 64, 0);
  } catch (const cpdit::Error&) {
  }
  return 0;
}
