#pragma once
// The Ulysses exchange: tokens split across the group, all heads  <->  the group's whole
// sequence, a share of the heads. Internal to the parallel layer.
//
// Heads are dealt to ranks by the tensor_split rule (with GQA: the key/value heads, and each rank
// takes the query heads of its key/value heads, so the ratio is kept) and every share is padded
// with zero heads to the largest one. Padding heads compute on zeros and are dropped on the
// way back. When U divides the head count this is the plain layout, with no padding.
//
// With GQA and fewer key/value heads than ranks (8 query heads, 2 key/value heads, U = 4), each
// key/value head is copied before the exchange, as long-context libraries do: c copies make
// H_kv * c heads with a ratio H / (H_kv * c), so query head h still reads a copy of its own key/value
// head. The backward sums the gradients of the c copies back into their head.
#include <cpdit/comm/communicator.hpp>
#include <cpdit/core/tensor.hpp>
#include <cpdit/parallel/kv_rotation.hpp>

#include <vector>

namespace cpdit::parallel {

struct HeadShares {
  std::vector<int64_t> count, offset;  // real heads of each rank, and where they start
  int64_t per_rank = 0;                // heads each rank computes on, padding included

  // kv_heads split over `ranks` by tensor_split, each share scaled by `ratio` (H / H_kv).
  static HeadShares of(int64_t kv_heads, int64_t ratio, int ranks);
  bool padded() const;
};

// Copies of each key/value head the exchange makes: the fewest c that divide the GQA ratio H / H_kv
// and give every one of `ranks` a key/value head (H_kv * c >= ranks); 1 when there are enough.
int64_t kv_copies(int64_t heads, int64_t kv_heads, int ranks);

class UlyssesExchange {
 public:
  // Collective over `group`: exchanges every rank's query and key lengths (on every call).
  // With a group of one rank every exchange returns its input.
  UlyssesExchange(comm::Communicator& group, int64_t heads, int64_t kv_heads, int64_t q_len,
                  int64_t k_len, CommStats& stats);

  // (B, s, H, D) local tokens, all heads -> (B, S, Hl, D) all tokens of the group, my heads.
  Tensor queries_to_heads(const Tensor& x) const { return to_heads(x, q_heads_, 1, 2); }
  // k, v (B, s, H_kv, D) -> (B, S, Hl_kv, D), each head copied kv_copies times first.
  Tensor keys_to_heads(const Tensor& x) const;
  // lse (B, H, s) -> (B, Hl, S).
  Tensor lse_to_heads(const Tensor& lse) const { return to_heads(lse, q_heads_, 2, 1); }
  // key mask (B, s_k) -> (B, S_k), in rank order.
  Tensor gather_key_mask(const Tensor& mask) const;

  // The inverses: (B, S, Hl, D) -> (B, s, H, D), and lse (B, Hl, S) -> (B, H, s).
  Tensor queries_to_tokens(const Tensor& y) const { return to_tokens(y, q_heads_, q_lengths_, 1, 2); }
  // dk, dv: the inverse exchange, then the copies of each key/value head summed (in f32).
  Tensor keys_to_tokens(const Tensor& y) const;
  Tensor lse_to_tokens(const Tensor& y) const { return to_tokens(y, q_heads_, q_lengths_, 2, 1); }

 private:
  Tensor to_heads(const Tensor& x, const HeadShares& shares, int seq_dim, int head_dim) const;
  Tensor to_tokens(const Tensor& y, const HeadShares& shares, const std::vector<int64_t>& lengths,
                   int seq_dim, int head_dim) const;

  comm::Communicator& group_;
  CommStats& stats_;
  int64_t kv_copies_ = 1;
  HeadShares q_heads_, kv_heads_;
  std::vector<int64_t> q_lengths_, k_lengths_;
};

}  // namespace cpdit::parallel
