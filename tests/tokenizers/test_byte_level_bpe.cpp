// Qwen2's byte-level BPE against transformers' Qwen2TokenizerFast (tests/data/fixtures/qwen2_tokenizer_tiny:
// 45 cases of plain text, the Qwen-Image and edit templates, a batch padded to its longest row,
// truncation, max-length padding and a 14192-token text), and one-line refusals of malformed files.
#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/tokenizers/byte_level_bpe.hpp>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <functional>

namespace cpdit::tokenizers {
namespace {

const std::string kFixture = std::string(CPDIT_TEST_DATA) + "/fixtures/qwen2_tokenizer_tiny";

std::vector<std::vector<int64_t>> rows_of(const Tensor& t) {
  std::vector<std::vector<int64_t>> rows;
  const Tensor c = t.contiguous();
  const int64_t* p = c.data<int64_t>();
  for (int64_t r = 0; r < c.size(0); ++r) rows.emplace_back(p + r * c.size(1), p + (r + 1) * c.size(1));
  return rows;
}

// transformers' tok(text, **call_kwargs) with this tokenizer: no kwargs = no truncation, no padding.
TokenBatch call_as_transformers(const Tokenizer& tok, const nlohmann::json& c) {
  const nlohmann::json& kw = c.at("call_kwargs");
  std::vector<std::string> texts;
  if (c.at("text").is_string()) texts.push_back(c.at("text").get<std::string>());
  else texts = c.at("text").get<std::vector<std::string>>();
  const bool truncate = kw.value("truncation", false);
  const int64_t max_length = truncate || kw.contains("max_length") ? kw.at("max_length").get<int64_t>() : INT64_MAX;
  const bool to_max_length = kw.contains("padding") && kw.at("padding") == "max_length";
  return tokenize(tok, texts, truncate || to_max_length ? max_length : INT64_MAX,
                  to_max_length ? Padding::max_length : Padding::longest);
}

TEST(ByteLevelBpe, EveryFixtureCaseEqualsTransformers) {
  const auto tok = load_tokenizer(kFixture + "/tokenizer");
  ASSERT_NE(dynamic_cast<const ByteLevelBpe*>(tok.get()), nullptr) << "tokenizer.json should read as byte-level BPE";
  const nlohmann::json cases = io::read_json(kFixture + "/cases.json");
  const auto expected = io::load_safetensors(kFixture + "/expected.safetensors");
  EXPECT_EQ(tok->pad_id(), cases.at("pad_token_id").get<int64_t>());
  size_t checked = 0;
  for (const nlohmann::json& c : cases.at("cases")) {
    const std::string name = c.at("name").get<std::string>();
    const TokenBatch got = call_as_transformers(*tok, c);
    EXPECT_EQ(rows_of(got.input_ids), rows_of(expected.at(name + ".input_ids"))) << name;
    EXPECT_EQ(rows_of(got.attention_mask), rows_of(expected.at(name + ".attention_mask"))) << name;
    ++checked;
  }
  EXPECT_EQ(checked, 45u);
}

TEST(ByteLevelBpe, AddedTokensByTheirText) {
  const auto tok = ByteLevelBpe::load(kFixture + "/tokenizer");
  EXPECT_EQ(tok->added_token_id("<|image_pad|>"), 1012);
  EXPECT_EQ(tok->encode("<|vision_start|><|image_pad|><|vision_end|>", 100), (std::vector<int64_t>{1009, 1012, 1010}));
  EXPECT_EQ(tok->model_max_length(), 131072);
  try {
    tok->added_token_id("<|nope|>");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no added token <|nope|>"), std::string::npos) << e.what();
  }
}

TEST(ByteLevelBpe, InvalidUtf8IsRefused) {
  const auto tok = ByteLevelBpe::load(kFixture + "/tokenizer");
  try {
    tok->encode("abc\xff", 10);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("not valid UTF-8 (byte 3)"), std::string::npos) << e.what();
  }
}

// A tokenizer.json of the 256 byte symbols, the merges and pre-tokeniser given, as text.
std::string tiny_tokenizer_json(const nlohmann::json& merge_list, const nlohmann::json& pre_tokenizer,
                                const nlohmann::json& added = nlohmann::json::array()) {
  const auto bytes = io::read_json(kFixture + "/tokenizer/tokenizer.json").at("model").at("vocab");
  nlohmann::json vocab = nlohmann::json::object();
  for (const auto& [symbol, id] : bytes.items())
    if (id.get<int64_t>() < 256) vocab[symbol] = id;
  vocab["ab"] = 256;
  return nlohmann::json{{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}}},
                        {"normalizer", {{"type", "NFC"}}},
                        {"pre_tokenizer", pre_tokenizer},
                        {"added_tokens", added}}
      .dump();
}

// A merges list, written out so nlohmann does not read a list of pairs as an object.
nlohmann::json merges(std::initializer_list<nlohmann::json> entries = {}) {
  nlohmann::json list = nlohmann::json::array();
  for (const nlohmann::json& e : entries) list.push_back(e);
  return list;
}
nlohmann::json pair(const char* left, const char* right) { return nlohmann::json::array({left, right}); }

const nlohmann::json kQwenPre = nlohmann::json::parse(R"({"type": "Sequence", "pretokenizers": [
  {"type": "Split", "pattern": {"Regex": "\\p{L}+|\\s+"}, "behavior": "Isolated", "invert": false},
  {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]})");

void expect_refused(const std::function<void()>& f, ErrorKind kind, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one naming '" << needle << "'";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.kind(), kind) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST(ByteLevelBpe, ATinyTokenizerMergesAndKeepsTheGapsOfItsSplit) {
  // The split matches letters and spaces only: "!" is a gap, still its own piece.
  const auto tok = ByteLevelBpe::parse(tiny_tokenizer_json(merges({pair("a", "b")}), kQwenPre), "", "tiny");
  EXPECT_EQ(tok->encode("ab!ab", 10), (std::vector<int64_t>{256, tok->encode("!", 1)[0], 256}));
  EXPECT_EQ(tok->encode("ab!ab", 2).size(), 2u);  // truncated on the right
  // Merges also read as "left right" strings (tokenizers before 0.20).
  EXPECT_EQ(ByteLevelBpe::parse(tiny_tokenizer_json(merges({"a b"}), kQwenPre), "", "tiny")->encode("ab", 10),
            (std::vector<int64_t>{256}));
}

TEST(ByteLevelBpe, MalformedFilesAreRefusedInOneLine) {
  expect_refused([] { ByteLevelBpe::parse("{\"model\": ", "", "dir"); }, ErrorKind::format, "invalid JSON");
  // A merge whose symbol is not in the vocabulary, and one that is not a pair.
  expect_refused([] { ByteLevelBpe::parse(tiny_tokenizer_json(merges({pair("a", "zz")}), kQwenPre), "", "dir"); },
                 ErrorKind::format, "merge 0: symbol 'zz' is not in the vocabulary");
  const nlohmann::json one_symbol = merges({pair("a", "b"), nlohmann::json::array({"a"})});
  expect_refused([&] { ByteLevelBpe::parse(tiny_tokenizer_json(one_symbol, kQwenPre), "", "dir"); },
                 ErrorKind::format, "merge 1: expected a pair of symbols");
  expect_refused([] { ByteLevelBpe::parse(tiny_tokenizer_json(merges({"ab"}), kQwenPre), "", "dir"); }, ErrorKind::format,
                 "merge 0: expected two symbols separated by one space");
  // A pre-tokeniser this reader does not run.
  expect_refused([] { ByteLevelBpe::parse(tiny_tokenizer_json(merges(), {{"type", "Metaspace"}}), "", "dir"); },
                 ErrorKind::unsupported, "pre-tokenizer type \"Metaspace\" is not supported");
  nlohmann::json whitespace = kQwenPre;
  whitespace["pretokenizers"][0] = {{"type", "WhitespaceSplit"}};
  expect_refused([&] { ByteLevelBpe::parse(tiny_tokenizer_json(merges(), whitespace), "", "dir"); }, ErrorKind::unsupported,
                 "pre-tokenizer type \"WhitespaceSplit\" is not supported");
  nlohmann::json bad_regex = kQwenPre;
  bad_regex["pretokenizers"][0]["pattern"]["Regex"] = "(\\p{L}";
  expect_refused([&] { ByteLevelBpe::parse(tiny_tokenizer_json(merges(), bad_regex), "", "dir"); }, ErrorKind::format,
                 "the pre-tokeniser pattern does not compile");
  // An added token that strips its neighbours.
  expect_refused(
      [] {
        const auto strips = nlohmann::json::array({{{"id", 300}, {"content", "<x>"}, {"lstrip", true}}});
        ByteLevelBpe::parse(tiny_tokenizer_json(merges(), kQwenPre, strips), "", "dir");
      },
      ErrorKind::unsupported, "added token <x> sets lstrip");
  // A vocabulary without every byte symbol.
  nlohmann::json j = nlohmann::json::parse(tiny_tokenizer_json(merges(), kQwenPre));
  j["model"]["vocab"].erase("a");
  expect_refused([&] { ByteLevelBpe::parse(j.dump(), "", "dir"); }, ErrorKind::format,
                 "lacks the byte symbol of byte 97");
}

}  // namespace
}  // namespace cpdit::tokenizers
