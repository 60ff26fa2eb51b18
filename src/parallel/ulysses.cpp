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

// (B, s, H_kv, D) -> (B, s, H_kv * copies, D): head h becomes heads h * copies .. h * copies + copies - 1.
Tensor copy_heads(const Tensor& x, int64_t copies) {
  if (copies == 1) return x;
  Shape shape = x.shape();
  shape[2] *= copies;
  Tensor out = Tensor::empty(shape, x.dtype());
  for (int64_t h = 0; h < x.size(2); ++h)
    for (int64_t c = 0; c < copies; ++c) out.narrow(2, h * copies + c, 1).copy_(x.narrow(2, h, 1));
  return out;
}

// The inverse for gradients: (B, s, H_kv * copies, D) -> (B, s, H_kv, D), each head the sum of its
// copies, in f32 (the ring's gradients are f32; a low-precision sum would round once per copy).
Tensor sum_head_copies(const Tensor& y, int64_t copies) {
  if (copies == 1) return y;
  const Tensor g = y.to(DType::f32);
  const int64_t rows = g.size(0) * g.size(1) * g.size(2) / copies, dim = g.size(3);
  Shape shape = g.shape();
  shape[2] /= copies;
  Tensor out = Tensor::zeros(shape, DType::f32);
  const float* in = g.data<float>();
  float* sum = out.data<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < copies; ++c)
      for (int64_t d = 0; d < dim; ++d) sum[r * dim + d] += in[(r * copies + c) * dim + d];
  return out.to(y.dtype());
}

}  // namespace

int64_t kv_copies(int64_t heads, int64_t kv_heads, int ranks) {
  const int64_t ratio = heads / kv_heads;
  for (int64_t c = 1; c < ratio; ++c)
    if (ratio % c == 0 && kv_heads * c >= ranks) return c;
  return ratio;  // every query head its own key/value head: H >= U is checked at setup
}

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
      kv_copies_(kv_copies(heads, kv_heads, group.size())),
      q_heads_(HeadShares::of(kv_heads * kv_copies_, heads / (kv_heads * kv_copies_), group.size())),
      kv_heads_(HeadShares::of(kv_heads * kv_copies_, 1, group.size())) {
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

Tensor UlyssesExchange::keys_to_heads(const Tensor& x) const {
  return to_heads(copy_heads(x, kv_copies_), kv_heads_, 1, 2);
}

Tensor UlyssesExchange::keys_to_tokens(const Tensor& y) const {
  return sum_head_copies(to_tokens(y, kv_heads_, k_lengths_, 1, 2), kv_copies_);
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
