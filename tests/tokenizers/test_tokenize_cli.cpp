// `cpdit tokenize` against transformers' own ids (tests/data/fixtures/tokenizer_clip_v2 and
// tokenizer_t5_v2: 24 prompts each, incl. CJK, emoji, accents, contractions, over-long text).
#include "support/run_cli.hpp"

#include <cpdit/io/json.hpp>
#include <cpdit/io/safetensors.hpp>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>

namespace cpdit::tokenizers {
namespace {

using cpdit::testing::run_cli;
using cpdit::testing::TempDir;

std::string fixture(const std::string& name) { return std::string(CPDIT_TEST_DATA) + "/fixtures/" + name; }

std::vector<std::vector<int64_t>> rows_of(const Tensor& t) {
  std::vector<std::vector<int64_t>> rows;
  const int64_t* p = t.contiguous().data<int64_t>();
  for (int64_t r = 0; r < t.size(0); ++r) rows.emplace_back(p + r * t.size(1), p + (r + 1) * t.size(1));
  return rows;
}

// Runs `cpdit tokenize` on the fixture's prompts and compares every row with expected_ids.json
// (ids) and expected.safetensors (attention_mask).
void expect_fixture_ids(const std::string& name, const std::string& extra_args) {
  TempDir dir("tokenize");
  const std::string out = dir.file("ids.safetensors");
  const auto r = run_cli("tokenize --tokenizer " + fixture(name) + " --prompts " + fixture(name) + "/prompts.json" +
                         extra_args + " --output " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "wrote " + out + "\n");  // it says what it wrote, and nothing else
  const auto got = io::load_safetensors(out);
  ASSERT_EQ(got.at("input_ids").dtype(), DType::i64);
  ASSERT_EQ(got.at("attention_mask").dtype(), DType::i64);
  const auto expected_ids = io::read_json(fixture(name) + "/expected_ids.json").at("input_ids")
                                .get<std::vector<std::vector<int64_t>>>();
  const auto ids = rows_of(got.at("input_ids"));
  ASSERT_EQ(ids.size(), expected_ids.size());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(ids[i], expected_ids[i]) << name << " prompt " << i;
  const auto expected_mask =
      rows_of(io::load_safetensors(fixture(name) + "/expected.safetensors").at("attention_mask"));
  EXPECT_EQ(rows_of(got.at("attention_mask")), expected_mask);
}

TEST(TokenizeCli, ClipIdsEqualTransformers) { expect_fixture_ids("tokenizer_clip_v2", ""); }  // default 77

TEST(TokenizeCli, T5IdsEqualTransformers) { expect_fixture_ids("tokenizer_t5_v2", " --max-length 32"); }

// A T5 folder as some Hub repositories ship it, tokenizer.json without spiece.model: one line naming
// the missing file, exit 2, nothing written.
TEST(TokenizeCli, TokenizerJsonAloneNamesTheMissingSpieceModel) {
  TempDir dir("tokenize_json_only");
  std::filesystem::create_directories(dir.path() / "tok");
  std::ofstream(dir.file("tok/tokenizer.json")) << "{}";
  std::ofstream(dir.file("prompts.json")) << R"(["a cat"])";
  const auto r = run_cli("tokenize --tokenizer " + dir.file("tok") + " --prompts " + dir.file("prompts.json") +
                         " --output " + dir.file("ids.safetensors"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("spiece.model"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("ids.safetensors")));
}

// Qwen-Image's call: three templated prompts padded to the longest (transformers' padding=True), the
// Qwen2 tokenizer read from tokenizer.json.
TEST(TokenizeCli, Qwen2BatchPaddedToTheLongestEqualsTransformers) {
  const std::string fx = fixture("qwen2_tokenizer_tiny");
  nlohmann::json batch;
  const nlohmann::json cases = io::read_json(fx + "/cases.json");
  for (const auto& c : cases.at("cases"))
    if (c.at("name") == "batch_qwenimage_tmpl") batch = c.at("text");
  ASSERT_EQ(batch.size(), 3u);
  TempDir dir("tokenize_qwen2");
  std::ofstream(dir.file("prompts.json")) << batch.dump();
  const std::string out = dir.file("ids.safetensors");
  const auto r = run_cli("tokenize --tokenizer " + fx + "/tokenizer --prompts " + dir.file("prompts.json") +
                         " --padding longest --max-length 1058 --output " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto got = io::load_safetensors(out), want = io::load_safetensors(fx + "/expected.safetensors");
  EXPECT_EQ(rows_of(got.at("input_ids")), rows_of(want.at("batch_qwenimage_tmpl.input_ids")));
  EXPECT_EQ(rows_of(got.at("attention_mask")), rows_of(want.at("batch_qwenimage_tmpl.attention_mask")));
}

// A downloaded tokenizer.json with a merge of a symbol its vocabulary lacks, and one with a pre-tokeniser
// this reader does not run: one line each, exit 2, nothing written.
TEST(TokenizeCli, BrokenTokenizerJsonIsRefusedInOneLine) {
  const nlohmann::json good = io::read_json(fixture("qwen2_tokenizer_tiny") + "/tokenizer/tokenizer.json");
  nlohmann::json broken_merge = good, unknown_pre = good;
  broken_merge["model"]["merges"][3] = nlohmann::json::array({"i", "\u2603"});
  unknown_pre["pre_tokenizer"]["pretokenizers"][0]["type"] = "Punctuation";
  for (const auto& [file, needle] : {std::pair{broken_merge, "merge 3: symbol '\u2603' is not in the vocabulary"},
                                     std::pair{unknown_pre, "pre-tokenizer type \"Punctuation\" is not supported"}}) {
    TempDir dir("tokenize_broken_json");
    std::filesystem::create_directories(dir.path() / "tok");
    std::ofstream(dir.file("tok/tokenizer.json")) << file.dump();
    std::ofstream(dir.file("prompts.json")) << R"(["a cat"])";
    const auto r = run_cli("tokenize --tokenizer " + dir.file("tok") + " --prompts " + dir.file("prompts.json") +
                           " --output " + dir.file("ids.safetensors"));
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir.file("ids.safetensors")));
  }
}

TEST(TokenizeCli, PromptsMustBeAListOfStrings) {
  TempDir dir("tokenize_bad_prompts");
  std::ofstream(dir.file("prompts.json")) << R"(["a cat", 3])";
  const auto r = run_cli("tokenize --tokenizer " + fixture("tokenizer_t5_v2") + " --prompts " +
                         dir.file("prompts.json") + " --output " + dir.file("ids.safetensors"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("entry 1 is not a string"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("ids.safetensors")));
}

}  // namespace
}  // namespace cpdit::tokenizers
