// shard / gather by the tensor_split rule.
#include <cpdit/comm/tensor_ops.hpp>
#include <cpdit/parallel/shard.hpp>

namespace cpdit::parallel {

Tensor shard(const Tensor& full, int dim, const comm::Communicator& comm) {
  const int d = dim < 0 ? dim + full.dim() : dim;
  const int64_t n = full.size(d);
  const int64_t start = split_offset(n, comm.size(), comm.rank());
  const int64_t length = split_sizes(n, comm.size())[size_t(comm.rank())];
  return full.narrow(d, start, length).clone();
}

Tensor gather(const Tensor& part, int dim, comm::Communicator& comm) {
  return comm::all_gather(comm, part, dim < 0 ? dim + part.dim() : dim);
}

}  // namespace cpdit::parallel
