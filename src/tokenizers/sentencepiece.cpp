#include "sentencepiece.hpp"
#include "utf8.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>

#include <sentencepiece_processor.h>

#include <filesystem>

namespace cpdit::tokenizers {

SentencePieceTokenizer::SentencePieceTokenizer()
    : processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}

void SentencePieceTokenizer::take_special_ids(const std::string& source) {
  CPDIT_CHECK(processor_->eos_id() >= 0, format, source,
              ": the model has no </s> piece, which T5 appends to every text");
  eos_ = processor_->eos_id();
  // T5 and UMT5 pad with id 0 (<pad>); a model that defines no pad piece still pads with 0.
  pad_ = processor_->pad_id() >= 0 ? processor_->pad_id() : 0;
}

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::from_serialized(const std::string& proto,
                                                                                const std::string& source) {
  std::unique_ptr<SentencePieceTokenizer> t(new SentencePieceTokenizer());
  const auto status = t->processor_->LoadFromSerializedProto(proto);
  CPDIT_CHECK(status.ok(), format, source, ": not a SentencePiece model (", status.ToString(), ")");
  t->take_special_ids(source);
  return t;
}

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& folder) : SentencePieceTokenizer() {
  const std::filesystem::path dir(folder);
  // Read through io::read_text (a regular file of bounded size), then parsed from memory.
  const auto status = processor_->LoadFromSerializedProto(io::read_text((dir / "spiece.model").string()));
  CPDIT_CHECK(status.ok(), format, (dir / "spiece.model").string(), ": not a SentencePiece model (", status.ToString(),
              ")");
  take_special_ids((dir / "spiece.model").string());
  if (std::filesystem::exists(dir / "tokenizer_config.json")) {
    const nlohmann::json config = io::read_json((dir / "tokenizer_config.json").string());
    // A config without a real limit writes a huge number (transformers' VERY_LARGE_INTEGER): keep 512.
    if (config.is_object() && config.contains("model_max_length") && config["model_max_length"].is_number_integer()) {
      const int64_t n = config["model_max_length"].get<int64_t>();
      if (n >= 1 && n <= 1'000'000) max_length_ = n;
    }
  }
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<int64_t> SentencePieceTokenizer::encode(const std::string& text, int64_t max_length) const {
  CPDIT_CHECK(max_length >= 1, invalid_argument, "T5 max length must be at least 1 (eos), got ", max_length);
  check_utf8(text);
  std::vector<int> pieces;
  const auto status = processor_->Encode(text, &pieces);
  CPDIT_CHECK(status.ok(), invalid_argument, "SentencePiece cannot encode the text: ", status.ToString());
  std::vector<int64_t> ids(pieces.begin(), pieces.end());
  if (int64_t(ids.size()) > max_length - 1) ids.resize(size_t(max_length - 1));
  ids.push_back(eos_);
  return ids;
}

}  // namespace cpdit::tokenizers
