#pragma once
// Merging attention results over disjoint key sets by their log-sum-exp, in f32.
#include <cpdit/core/tensor.hpp>

namespace cpdit::parallel {

// Running result of attention over the keys seen so far: out f32 (B, S, H, D), lse f32 (B, H, S).
// Starts as "no keys": out = 0, lse = -inf.
struct PartialAttention {
  Tensor out;
  Tensor lse;

  static PartialAttention empty(int64_t B, int64_t S, int64_t H, int64_t D);
};

// acc <- attention over (acc's keys) U (the chunk's keys), given the chunk's (out, lse) with out in
// any float dtype and lse f32 (B, H, S). Stable form:
//   out = o_a - sigmoid(b - a) (o_a - o_b),   lse = a + softplus(b - a)
// with the -inf guard: a chunk whose row saw no keys (lse = -inf) leaves the row unchanged, a row
// with no keys so far takes the chunk's, and a row with none in either stays (0, -inf).
void merge_into(PartialAttention& acc, const Tensor& chunk_out, const Tensor& chunk_lse);

}  // namespace cpdit::parallel
