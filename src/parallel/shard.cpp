// shard / gather by the tensor_split rule, and by a token layout over a mesh.
#include <cpdit/comm/tensor_ops.hpp>
#include <cpdit/parallel/shard.hpp>

#include <algorithm>

namespace cpdit::parallel {
namespace {

int positive_dim(int dim, const Tensor& t) { return dim < 0 ? dim + t.dim() : dim; }

}  // namespace

Tensor shard(const Tensor& full, int dim, const comm::Communicator& comm) {
  const int d = positive_dim(dim, full);
  const int64_t n = full.size(d);
  const int64_t start = split_offset(n, comm.size(), comm.rank());
  const int64_t length = split_sizes(n, comm.size())[size_t(comm.rank())];
  return full.narrow(d, start, length).clone();
}

Tensor gather(const Tensor& part, int dim, comm::Communicator& comm) {
  return comm::all_gather(comm, part, positive_dim(dim, part));
}

Tensor shard(const Tensor& full, int dim, comm::Mesh& mesh, TokenLayout layout) {
  if (layout == TokenLayout::contiguous) return shard(full, dim, mesh.flat());
  const int d = positive_dim(dim, full);
  std::vector<Tensor> parts;
  for (const TokenRange& r : rank_ranges(full.size(d), mesh.ring_degree(), mesh.ulysses_degree(), mesh.rank(), layout))
    parts.push_back(full.narrow(d, r.start, r.length));
  return parts.size() == 1 ? parts[0].clone() : parts.empty() ? full.narrow(d, 0, 0).clone() : cat(parts, d);
}

Tensor gather(const Tensor& part, int dim, comm::Mesh& mesh, TokenLayout layout) {
  const Tensor all = gather(part, dim, mesh.flat());  // every rank's ranges, in rank order
  if (layout == TokenLayout::contiguous) return all;
  const int d = positive_dim(dim, part);
  const int64_t n = all.size(d);
  // Each held range goes back to its global place: sorted by global start, the pieces tile 0..n.
  std::vector<std::pair<int64_t, Tensor>> pieces;
  int64_t held = 0;
  for (int g = 0; g < mesh.flat().size(); ++g)
    for (const TokenRange& r : rank_ranges(n, mesh.ring_degree(), mesh.ulysses_degree(), g, layout)) {
      pieces.emplace_back(r.start, all.narrow(d, held, r.length));
      held += r.length;
    }
  std::sort(pieces.begin(), pieces.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Tensor> ordered;
  for (auto& [start, piece] : pieces) ordered.push_back(piece);
  return ordered.empty() ? all : cat(ordered, d);
}

}  // namespace cpdit::parallel
