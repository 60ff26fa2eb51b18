#include "byte_level.hpp"
#include "sentencepiece.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/tokenizers/builtin.hpp>
#include <cpdit/tokenizers/byte_level_bpe.hpp>
#include <cpdit/tokenizers/clip_bpe.hpp>

#include <nlohmann/json.hpp>
#include <sentencepiece_trainer.h>

#include <mutex>
#include <unordered_map>
#include <string>
#include <vector>

namespace cpdit::tokenizers {

std::unique_ptr<Tokenizer> builtin_clip_tokenizer() {
  nlohmann::json vocab = nlohmann::json::object();
  int64_t id = 0;
  for (const std::string& symbol : byte_symbols()) vocab[symbol] = id++;
  for (const std::string& symbol : byte_symbols()) vocab[symbol + "</w>"] = id++;
  vocab["<|startoftext|>"] = id++;
  vocab["<|endoftext|>"] = id++;
  CPDIT_CHECK(id == kBuiltinClipVocabSize, internal, "the built-in CLIP vocabulary has ", id, " ids");
  // merges.txt opens with a version line; no merges follow.
  return ClipBpe::parse(vocab.dump(), "#version: 0.2\n", "", "built-in CLIP tokenizer");
}

std::unique_ptr<Tokenizer> builtin_qwen2_tokenizer() {
  nlohmann::json vocab = nlohmann::json::object();
  int64_t id = 0;
  for (const std::string& symbol : byte_symbols()) vocab[symbol] = id++;
  nlohmann::json added = nlohmann::json::array();
  for (const char* token : {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                            "<|image_pad|>", "<|video_pad|>"})
    added.push_back({{"id", id++}, {"content", token}, {"special", true}, {"normalized", false}});
  CPDIT_CHECK(id == kBuiltinQwen2VocabSize, internal, "the built-in Qwen2 vocabulary has ", id, " ids");
  const nlohmann::json tokenizer = {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", kQwen2Pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
      {"added_tokens", added}};
  return ByteLevelBpe::parse(tokenizer.dump(), "", "built-in Qwen2 tokenizer");
}

namespace {

// The training text: every printable ASCII character once, so each becomes a piece.
class AsciiSentences : public sentencepiece::SentenceIterator {
 public:
  AsciiSentences() {
    for (char c = 32; c < 127; ++c) line_ += c;
  }
  bool done() const override { return done_; }
  void Next() override { done_ = true; }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  std::string line_;
  bool done_ = false;
};

// Trained once per process: a few milliseconds, deterministic for the same text and options.
const std::string& builtin_sentencepiece_model() {
  static std::once_flag once;
  static std::string proto;
  std::call_once(once, [] {
    AsciiSentences sentences;
    const std::unordered_map<std::string, std::string> options{
        {"model_type", "char"}, {"vocab_size", std::to_string(kBuiltinSentencePieceVocabSize)},
        {"hard_vocab_limit", "false"}, {"character_coverage", "1.0"}, {"pad_id", "0"}, {"eos_id", "1"},
        {"unk_id", "2"}, {"bos_id", "-1"}, {"minloglevel", "2"}};
    const auto status = sentencepiece::SentencePieceTrainer::Train(options, &sentences, &proto);
    CPDIT_CHECK(status.ok(), internal, "training the built-in SentencePiece model failed: ", status.ToString());
  });
  return proto;
}

}  // namespace

std::unique_ptr<Tokenizer> builtin_sentencepiece_tokenizer() {
  return SentencePieceTokenizer::from_serialized(builtin_sentencepiece_model(), "built-in SentencePiece model");
}

}  // namespace cpdit::tokenizers
