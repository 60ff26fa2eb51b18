#pragma once
// The BPE step both byte-level tokenizers share (CLIP's and Qwen2's): a vocabulary of symbols and its
// ranked merges, applied to one pre-tokenised word as the Rust tokenizers library applies them.
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace cpdit::tokenizers {

using Vocab = std::unordered_map<std::string, int64_t>;

// A JSON object of symbol -> id (vocab.json, tokenizer.json's model.vocab), ids in [0, 2^31) so that a
// pair of them is one 64-bit key; `where` names it in errors.
Vocab parse_vocab(const nlohmann::json& j, const std::string& where);

// A special token's text in tokenizer_config.json: a string or {"content": string}; `fallback` when the
// entry is missing or null. `where` names the file in errors.
std::string config_token(const nlohmann::json& config, const char* name, const std::string& fallback,
                         const std::string& where);

class BpeMerges {
 public:
  // Adds the merge of `left` and `right`, ranked after every merge added before it; both symbols and
  // their join must be in `vocab` (refused naming `where`, e.g. "merges.txt line 3"). A pair added twice
  // keeps its first rank, as the Rust library does.
  void add(const Vocab& vocab, const std::string& left, const std::string& right, const std::string& where);
  // Merges `word` (symbol ids) in place until no adjacent pair has a merge: always the lowest-ranked
  // pair, the leftmost of equal ones.
  void apply(std::vector<int64_t>& word) const;

 private:
  struct Merge {
    int64_t rank;
    int64_t merged;  // id of the joined symbol
  };
  const Merge* find(int64_t left, int64_t right) const;
  std::unordered_map<uint64_t, Merge> merges_;  // key: left id << 32 | right id
};

}  // namespace cpdit::tokenizers
