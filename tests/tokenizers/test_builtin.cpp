// The tokenizers built into the binary for the presets: CLIP's byte-level BPE over the 256 byte
// symbols without merges (one id per character, the word's last with "</w>"), and the SentencePiece
// character model (one piece per character, T5's special ids).
#include <cpdit/tokenizers/builtin.hpp>

#include <cpdit/core/error.hpp>

#include <gtest/gtest.h>

#include <algorithm>

namespace cpdit::tokenizers {
namespace {

TEST(BuiltinTokenizers, ClipGivesEachByteItsSymbolAndClosesWords) {
  const auto clip = builtin_clip_tokenizer();
  const int64_t bos = kBuiltinClipVocabSize - 2, eos = kBuiltinClipVocabSize - 1;
  // Byte b's symbol alone is id b, closing a word 256 + b. "A b!" is lower-cased and split into the
  // one-character pieces "a", "b", "!".
  const std::vector<int64_t> ids = clip->encode("A b!", 77);
  EXPECT_EQ(ids, (std::vector<int64_t>{bos, 256 + 'a', 256 + 'b', 256 + '!', eos}));
  EXPECT_EQ(clip->encode("ab", 77), (std::vector<int64_t>{bos, 'a', 256 + 'b', eos}));
  EXPECT_EQ(clip->pad_id(), eos);
  // Truncation keeps the closing eos; the legacy pooling rule finds it as the largest id.
  const std::vector<int64_t> cut = clip->encode("abcdef", 4);
  EXPECT_EQ(cut.size(), 4u);
  EXPECT_EQ(cut.back(), eos);
  EXPECT_EQ(*std::max_element(cut.begin(), cut.end()), eos);
}

TEST(BuiltinTokenizers, SentencePieceIsOnePiecePerCharacterWithT5SpecialIds) {
  const auto t5 = builtin_sentencepiece_tokenizer();
  EXPECT_EQ(t5->pad_id(), 0);
  const std::vector<int64_t> ids = t5->encode("a red fox", 64);
  // Each word is "▁" (the word start) plus its characters: 1 + 1, 1 + 3, 1 + 3 pieces, then </s>.
  ASSERT_EQ(ids.size(), 11u);
  EXPECT_EQ(ids.back(), 1);  // </s>
  for (int64_t id : ids) {
    EXPECT_GT(id, 0);
    EXPECT_LT(id, kBuiltinSentencePieceVocabSize);
  }
  EXPECT_EQ(ids[0], ids[2]) << "every word start is the one piece '▁'";
  EXPECT_EQ(ids[0], ids[6]);
  EXPECT_NE(ids[1], ids[3]) << "'a' and 'r' are different pieces";
  EXPECT_EQ(t5->encode("a red fox", 64), ids) << "the same model every time";
  EXPECT_EQ(t5->encode("a red fox", 3).size(), 3u);
}

// Malformed UTF-8 is refused by every tokenizer alike, naming where (SentencePiece encoded the bytes,
// so a Wan prompt went through where a FLUX.1 one was refused): a cut sequence, a stray continuation
// byte, an overlong form, a surrogate's encoding.
TEST(BuiltinTokenizers, EveryTokenizerRefusesMalformedUtf8AtItsByte) {
  const auto clip = builtin_clip_tokenizer();
  const auto t5 = builtin_sentencepiece_tokenizer();
  for (const std::string bad : {"caf\xC3", "a\x80z", "\xC0\xAF", "x\xED\xA0\x80"}) {
    for (const Tokenizer* tokenizer : {clip.get(), t5.get()}) {
      try {
        tokenizer->encode(bad, 16);
        ADD_FAILURE() << "accepted " << bad;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("text to tokenise is not valid UTF-8 (byte "), std::string::npos) << e.what();
      }
    }
  }
  for (const Tokenizer* tokenizer : {clip.get(), t5.get()}) EXPECT_NO_THROW(tokenizer->encode("café 狐 🦊", 16));
}

}  // namespace
}  // namespace cpdit::tokenizers
