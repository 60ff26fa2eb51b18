// The Ulysses all-to-all exchange with head padding and variable sequence splits.
#include "parallel/ulysses.hpp"

#include <cpdit/comm/tensor_ops.hpp>
#include <cpdit/core/error.hpp>

#include <algorithm>
#include <chrono>

namespace cpdit::parallel {
namespace {

// Runs a blocking collective and counts its time as communication that was not hidden.
template <class Fn>
auto timed(CommStats& stats, Fn&& fn) {
  const auto start = std::chrono::steady_clock::now();
  auto result = fn();
  stats.wait_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

int64_t sent_bytes(const Tensor& t, int ranks) { return int64_t(t.nbytes()) * (ranks - 1) / ranks; }

// x with its head axis laid out as `ranks` equal shares of shares.per_rank, zero heads last in each.
Tensor pad_heads(const Tensor& x, const HeadShares& shares, int head_dim) {
  if (!shares.padded()) return x;
  Shape shape = x.shape();
  shape[size_t(head_dim)] = shares.per_rank * int64_t(shares.count.size());
  Tensor padded = Tensor::zeros(shape, x.dtype());
  for (size_t u = 0; u < shares.count.size(); ++u)
    padded.narrow(head_dim, int64_t(u) * shares.per_rank, shares.count[u])
        .copy_(x.narrow(head_dim, shares.offset[u], shares.count[u]));
  return padded;
}

Tensor unpad_heads(const Tensor& padded, const HeadShares& shares, int head_dim) {
  if (!shares.padded()) return padded;
  Shape shape = padded.shape();
  shape[size_t(head_dim)] = shares.offset.back() + shares.count.back();
  Tensor x = Tensor::empty(shape, padded.dtype());
  for (size_t u = 0; u < shares.count.size(); ++u)
    x.narrow(head_dim, shares.offset[u], shares.count[u])
        .copy_(padded.narrow(head_dim, int64_t(u) * shares.per_rank, shares.count[u]));
  return x;
}

}  // namespace

HeadShares HeadShares::of(int64_t kv_heads, int64_t ratio, int ranks) {
  HeadShares shares;
  for (int u = 0; u < ranks; ++u) {
    shares.count.push_back(split_sizes(kv_heads, ranks)[size_t(u)] * ratio);
    shares.offset.push_back(split_offset(kv_heads, ranks, u) * ratio);
  }
  shares.per_rank = shares.count.front();  // the first share is the largest
  return shares;
}

bool HeadShares::padded() const {
  return std::any_of(count.begin(), count.end(), [&](int64_t c) { return c != per_rank; });
}

UlyssesExchange::UlyssesExchange(comm::Communicator& group, int64_t heads, int64_t kv_heads,
                                 int64_t q_len, int64_t k_len, CommStats& stats)
    : group_(group),
      stats_(stats),
      q_heads_(HeadShares::of(kv_heads, heads / kv_heads, group.size())),
      kv_heads_(HeadShares::of(kv_heads, 1, group.size())) {
  if (group.size() == 1) return;
  const int64_t mine[2] = {q_len, k_len};
  std::vector<int64_t> all(2 * size_t(group.size()));
  timed(stats_, [&] {
    group_.all_gather(mine, sizeof mine, all.data());
    return 0;
  });
  for (int w = 0; w < group.size(); ++w) {
    q_lengths_.push_back(all[2 * size_t(w)]);
    k_lengths_.push_back(all[2 * size_t(w) + 1]);
  }
}

Tensor UlyssesExchange::to_heads(const Tensor& x, const HeadShares& shares, int seq_dim,
                                 int head_dim) const {
  if (group_.size() == 1) return x;
  const Tensor padded = pad_heads(x, shares, head_dim);
  stats_.bytes_sent += sent_bytes(padded, group_.size());
  return timed(stats_, [&] { return comm::all_to_all(group_, padded, head_dim, seq_dim); });
}

Tensor UlyssesExchange::to_tokens(const Tensor& y, const HeadShares& shares,
                                  const std::vector<int64_t>& lengths, int seq_dim,
                                  int head_dim) const {
  if (group_.size() == 1) return y;
  stats_.bytes_sent += sent_bytes(y, group_.size());
  const Tensor padded =
      timed(stats_, [&] { return comm::all_to_all(group_, y, seq_dim, head_dim, lengths); });
  return unpad_heads(padded, shares, head_dim);
}

Tensor UlyssesExchange::gather_key_mask(const Tensor& mask) const {
  if (group_.size() == 1) return mask;
  stats_.bytes_sent += int64_t(mask.nbytes()) * (group_.size() - 1);
  return timed(stats_, [&] { return comm::all_gather(group_, mask, 1); });
}

}  // namespace cpdit::parallel
