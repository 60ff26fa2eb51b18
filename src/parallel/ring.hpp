#pragma once
// Ring attention over one ring group, forward and backward. Internal to the parallel
// layer; the unified path calls it on each Ulysses head share (a ring of one rank is a plain call).
#include <cpdit/attention/attention.hpp>
#include <cpdit/comm/communicator.hpp>
#include <cpdit/parallel/config.hpp>
#include <cpdit/parallel/kv_rotation.hpp>
#include <cpdit/parallel/layout.hpp>

#include <vector>

namespace cpdit::parallel {

struct RingSetup {
  const attention::Backend& backend;
  comm::Communicator& ring;
  RotateMethod method;
  bool convert_to_fp32;
  float scale;
  CommStats& stats;
};

// Where a ring's tokens sit in the global sequence, for a position rule: the ranges of this rank's
// queries, and of ring rank r's keys, each in the order held. Empty lists (no rule): unused.
struct RingPositions {
  std::vector<TokenRange> queries;
  std::vector<std::vector<TokenRange>> keys;  // by ring rank
};

// q (B, s, H, D) local queries; k, v (B, s_k, H_kv, D) and key mask (B, s_k) this rank's chunk. A
// position rule in `mask` is evaluated on every pair of a query range and a key range of
// `positions` as one call with contiguous global positions; pairs the rule hides are skipped.
// Returns out (B, s, H, D) in f32 when convert_to_fp32, else in q's dtype, and lse f32 (B, H, s).
attention::Result ring_forward(const RingSetup& setup, const Tensor& q, const Tensor& k,
                               const Tensor& v, const attention::Mask& mask, const RingPositions& positions);

// out and lse are the global (merged) forward results of these queries. Returns f32 dq (local
// queries) and dk, dv of this rank's own chunk, summed over every rank's queries.
attention::Grads ring_backward(const RingSetup& setup, const Tensor& dout, const Tensor& q,
                               const Tensor& k, const Tensor& v, const Tensor& out,
                               const Tensor& lse, const attention::Mask& mask,
                               const RingPositions& positions);

}  // namespace cpdit::parallel
