// CLIP BPE details the fixture's prompts do not reach, and one-line refusals of malformed files.
#include <cpdit/core/error.hpp>
#include <cpdit/tokenizers/clip_bpe.hpp>

#include <gtest/gtest.h>

#include <functional>
#include <sstream>

namespace cpdit::tokenizers {
namespace {

const std::string kClip = std::string(CPDIT_TEST_DATA) + "/fixtures/tokenizer_clip_v2";
constexpr int64_t kBos = 49406, kEos = 49407;

// A vocabulary of a, b, c with and without </w>, the special tokens and what `extra` adds, as JSON.
std::string tiny_vocab(const std::string& extra = "") {
  // A stream, not a chain of operator+: g++ 12 warns falsely (-Wrestrict) on the chain.
  std::ostringstream json;
  json << "{";
  int64_t id = 0;
  for (char c = 'a'; c <= 'c'; ++c) {
    json << '"' << c << "\": " << id++ << ", ";
    json << '"' << c << "</w>\": " << id++ << ", ";
  }
  json << extra << "\"<|startoftext|>\": 100, \"<|endoftext|>\": 101}";
  return json.str();
}

void expect_one_line_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one naming '" << needle << "'";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::format) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST(ClipBpe, MergesApplyByRankNotByPosition) {
  // "ab" ranks before "bc": "abc" -> "ab" + "c</w>"; with the order swapped -> "a" + "bc</w>".
  const std::string vocab = tiny_vocab("\"ab\": 10, \"bc</w>\": 11, ");
  auto first = ClipBpe::parse(vocab, "#version: 0.2\na b\nb c</w>\n", "", "test");
  EXPECT_EQ(first->encode("abc", 77), (std::vector<int64_t>{100, 10, 5, 101}));
  auto second = ClipBpe::parse(vocab, "b c</w>\na b\n", "", "test");
  EXPECT_EQ(second->encode("abc", 77), (std::vector<int64_t>{100, 0, 11, 101}));
}

TEST(ClipBpe, OverLongTextKeepsBosAndEos) {
  auto clip = ClipBpe::load(kClip);
  std::string text;
  for (int i = 0; i < 100; ++i) text += "cat ";
  const auto ids = clip->encode(text, 77);
  ASSERT_EQ(ids.size(), 77u);
  EXPECT_EQ(ids.front(), kBos);
  EXPECT_EQ(ids.back(), kEos);
  EXPECT_EQ(ids[75], ids[1]);  // still "cat": the text was cut, not the closing token
  EXPECT_EQ(clip->encode(text, 2), (std::vector<int64_t>{kBos, kEos}));
  EXPECT_THROW(clip->encode(text, 1), Error);
}

TEST(ClipBpe, SpecialTokenTextStandsForItsId) {
  auto clip = ClipBpe::load(kClip);
  const auto plain = clip->encode("a cat", 77);
  const auto marked = clip->encode("a<|endoftext|>cat", 77);
  ASSERT_EQ(marked.size(), plain.size() + 1);
  EXPECT_EQ(marked[2], kEos);
}

TEST(ClipBpe, DecomposedAccentsAreComposedFirst) {
  auto clip = ClipBpe::load(kClip);
  // "café" with U+0301 combining acute (NFD) tokenises as the composed U+00E9 form.
  EXPECT_EQ(clip->encode("cafe\xCC\x81", 77), clip->encode("caf\xC3\xA9", 77));
}

TEST(ClipBpe, RefusesInvalidUtf8) {
  auto clip = ClipBpe::load(kClip);
  EXPECT_THROW(clip->encode("caf\xC3", 77), Error);
}

TEST(ClipBpe, MalformedFilesAreRefusedInOneLine) {
  const std::string vocab = tiny_vocab("\"ab\": 10, ");
  expect_one_line_error([&] { ClipBpe::parse("[1, 2]", "", "", "dir"); }, "vocab.json");
  expect_one_line_error([&] { ClipBpe::parse("{\"a\": ", "", "", "dir"); }, "vocab.json: invalid JSON");
  expect_one_line_error([&] { ClipBpe::parse(tiny_vocab("\"x\": -1, "), "", "", "dir"); }, "token 'x'");
  expect_one_line_error([&] { ClipBpe::parse(vocab, "a b c\n", "", "dir"); }, "merges.txt line 1");
  expect_one_line_error([&] { ClipBpe::parse(vocab, "a b\nab\n", "", "dir"); }, "merges.txt line 2");
  expect_one_line_error([&] { ClipBpe::parse(vocab, "b c\n", "", "dir"); }, "merged symbol 'bc'");
  expect_one_line_error([&] { ClipBpe::parse(vocab, "a b\n", "[]", "dir"); }, "tokenizer_config.json");
  expect_one_line_error([&] { ClipBpe::parse(vocab, "a b\n", R"({"bos_token": "<s>"})", "dir"); }, "bos_token '<s>'");
  expect_one_line_error([&] { ClipBpe::parse(vocab, "a b\n", R"({"model_max_length": 1})", "dir"); },
                        "model_max_length");
}

}  // namespace
}  // namespace cpdit::tokenizers
