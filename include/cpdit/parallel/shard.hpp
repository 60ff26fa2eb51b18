#pragma once
// Splitting a full tensor across the ranks of a group and gathering it back, by the tensor_split
// rule: with n = q*W + m, ranks 0..m-1 hold q+1 elements along `dim`, the others q. Ranks
// may hold nothing when n < W.
#include <cpdit/comm/communicator.hpp>
#include <cpdit/comm/mesh.hpp>
#include <cpdit/core/tensor.hpp>
#include <cpdit/parallel/layout.hpp>

namespace cpdit::parallel {

// This rank's part of `full` along `dim`, as a new contiguous tensor owned by the calling rank.
Tensor shard(const Tensor& full, int dim, const comm::Communicator& comm);

// Collective: the concatenation along `dim` of every rank's part, in rank order (parts may differ
// in length, as shard makes them).
Tensor gather(const Tensor& part, int dim, comm::Communicator& comm);

// The same over a ring x Ulysses mesh in a token layout (layout.hpp): this rank's ranges along
// `dim`, in the order it holds them; and the whole sequence back from every rank's ranges.
// Contiguous is the two functions above on the mesh's flat group.
Tensor shard(const Tensor& full, int dim, comm::Mesh& mesh, TokenLayout layout);
Tensor gather(const Tensor& part, int dim, comm::Mesh& mesh, TokenLayout layout);

}  // namespace cpdit::parallel
