#include "bpe.hpp"

#include <cpdit/core/error.hpp>

#include <nlohmann/json.hpp>

#include <queue>

namespace cpdit::tokenizers {

namespace {
uint64_t pair_key(int64_t left, int64_t right) { return uint64_t(left) << 32 | uint64_t(right); }
}  // namespace

Vocab parse_vocab(const nlohmann::json& j, const std::string& where) {
  CPDIT_CHECK(j.is_object() && !j.empty(), format, where, ": not a JSON object of token -> id");
  Vocab vocab;
  for (const auto& [token, id] : j.items()) {
    CPDIT_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < (int64_t(1) << 31), format,
                where, ": the id of token '", token, "' is not an integer in [0, 2^31)");
    vocab.emplace(token, id.get<int64_t>());
  }
  return vocab;
}

std::string config_token(const nlohmann::json& config, const char* name, const std::string& fallback,
                         const std::string& where) {
  if (!config.contains(name) || config[name].is_null()) return fallback;
  const nlohmann::json& v = config[name];
  if (v.is_string()) return v.get<std::string>();
  CPDIT_CHECK(v.is_object() && v.contains("content") && v["content"].is_string(), format, where, ": ", name,
              " is neither a string nor {\"content\": string}");
  return v["content"].get<std::string>();
}

void BpeMerges::add(const Vocab& vocab, const std::string& left, const std::string& right, const std::string& where) {
  auto id_of = [&](const std::string& symbol, const char* role) {
    auto it = vocab.find(symbol);
    CPDIT_CHECK(it != vocab.end(), format, where, ": ", role, " '", symbol, "' is not in the vocabulary");
    return it->second;
  };
  const int64_t left_id = id_of(left, "symbol"), right_id = id_of(right, "symbol");
  merges_.try_emplace(pair_key(left_id, right_id), Merge{int64_t(merges_.size()), id_of(left + right, "merged symbol")});
}

const BpeMerges::Merge* BpeMerges::find(int64_t left, int64_t right) const {
  auto it = merges_.find(pair_key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeMerges::apply(std::vector<int64_t>& word) const {
  const int64_t n = int64_t(word.size());
  if (n < 2) return;
  // The word as a linked list: a merge joins a symbol into its left neighbour.
  std::vector<int64_t> prev(static_cast<size_t>(n)), next(static_cast<size_t>(n));
  std::vector<char> alive(static_cast<size_t>(n), 1);
  for (int64_t i = 0; i < n; ++i) prev[size_t(i)] = i - 1, next[size_t(i)] = i + 1 < n ? i + 1 : -1;
  struct Candidate {
    int64_t rank, pos, merged;
  };
  auto later = [](const Candidate& a, const Candidate& b) { return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos; };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(later)> queue(later);
  auto push = [&](int64_t pos) {
    if (next[size_t(pos)] < 0) return;
    if (const Merge* m = find(word[size_t(pos)], word[size_t(next[size_t(pos)])])) queue.push({m->rank, pos, m->merged});
  };
  for (int64_t i = 0; i + 1 < n; ++i) push(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    const size_t at = size_t(top.pos);
    if (!alive[at] || next[at] < 0) continue;
    const size_t right = size_t(next[at]);
    // A candidate whose pair has changed since it was queued is stale (the library's test: the same join).
    const Merge* m = find(word[at], word[right]);
    if (m == nullptr || m->merged != top.merged) continue;
    word[at] = top.merged;
    alive[right] = 0;
    next[at] = next[right];
    if (next[right] >= 0) prev[size_t(next[right])] = top.pos;
    if (prev[at] >= 0) push(prev[at]);
    push(top.pos);
  }
  size_t kept = 0;
  for (size_t i = 0; i < size_t(n); ++i)
    if (alive[i]) word[kept++] = word[i];
  word.resize(kept);
}

}  // namespace cpdit::tokenizers
