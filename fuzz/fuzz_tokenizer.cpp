// libFuzzer entry: the CLIP tokenizer's files (vocab.json, merges.txt, tokenizer_config.json, as one
// input split at NUL bytes) must either load or be refused with cpdit::Error; a tokenizer that loads
// must encode any text (or refuse it, e.g. invalid UTF-8) within bounds.
#include <cpdit/core/error.hpp>
#include <cpdit/tokenizers/clip_bpe.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t first = input.find('\0');
  const size_t second = first == std::string_view::npos ? first : input.find('\0', first + 1);
  const std::string_view vocab = input.substr(0, first);
  const std::string_view merges = first == std::string_view::npos ? "" : input.substr(first + 1, second - first - 1);
  const std::string_view config = second == std::string_view::npos ? "" : input.substr(second + 1);
  try {
    auto clip = cpdit::tokenizers::ClipBpe::parse(vocab, merges, config, "fuzz input");
    for (std::string_view text : {std::string_view("a photo of a cat's 3 dogs!! <|endoftext|>"), merges}) {
      try {
        const auto ids = clip->encode(std::string(text), 77);
        if (ids.size() > 77 || ids.size() < 2) __builtin_trap();  // truncation promised at most 77, bos + eos
      } catch (const cpdit::Error&) {
        // text that is not UTF-8: refused, fine
      }
    }
  } catch (const cpdit::Error&) {
    // malformed files refused with a message: the expected outcome for most inputs
  }
  return 0;
}
