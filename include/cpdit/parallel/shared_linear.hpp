#pragma once
// A Linear layer whose input is the same on every rank of the context-parallel group bound on this
// thread: a modulation's per-sample timestep embedding (context parallelism splits the tokens, never
// the batch). Each rank computes a contiguous share of the output features and the shares are
// gathered, so the group reads the layer's weight once instead of once per rank. At one vector per
// sample the product is bound by reading the weight: FLUX.1's double block reads 226 MB of modulation
// weights per call, about 16 ms of its 0.42 CPU s in bf16 at one rank, which every rank repeated
// whole (18432 x 3072 bf16 on 2 ranks: 7.0 ms of each rank's CPU time per call whole, 4.0 shared).
#include <cpdit/core/tensor.hpp>
#include <cpdit/core/weight.hpp>

namespace cpdit::parallel {

// kernels::linear(x, weight, bias), the output features shared out over the bound group (the
// context's flat group, as row_split_group) in runs of 64, gathered in rank order; without one (one
// rank) kernels::linear itself. Each output feature is the sum a single rank computes, bit for bit.
// Collective: every rank of the group calls it with the same x.
Tensor shared_linear(const Tensor& x, const Weight& weight, const Tensor& bias);

}  // namespace cpdit::parallel
