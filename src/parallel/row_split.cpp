// The row split's binding, its GroupNorm statistics and the decode driver (see halo.hpp).
#include <cpdit/core/error.hpp>
#include <cpdit/parallel/halo.hpp>
#include <cpdit/parallel/shard.hpp>

#include <vector>

namespace cpdit::parallel {
namespace {
thread_local comm::Communicator* bound = nullptr;
}  // namespace

ScopedRowSplit::ScopedRowSplit(comm::Communicator& group) : previous_(bound) { bound = &group; }
ScopedRowSplit::~ScopedRowSplit() { bound = previous_; }
comm::Communicator* bound_row_split() { return bound; }

Tensor group_norm_rows(const Tensor& x, int64_t groups, const Tensor& weight, const Tensor& bias, float eps) {
  kernels::GroupMoments moments = kernels::group_moments(x, groups);
  comm::Communicator* group = bound_row_split();
  if (group && group->size() > 1) {
    // Doubles travel as bytes (all_reduce has no f64); summing the gathered blocks in rank order
    // gives every rank bitwise the same statistics.
    const size_t n = moments.sums.size();
    std::vector<double> all(n * size_t(group->size()));
    group->all_gather(moments.sums.data(), n * sizeof(double), all.data());
    std::vector<int64_t> counts(size_t(group->size()));
    group->all_gather(&moments.count, sizeof(int64_t), counts.data());
    moments.sums.assign(n, 0.0);
    moments.count = 0;
    for (int r = 0; r < group->size(); ++r) {
      for (size_t i = 0; i < n; ++i) moments.sums[i] += all[size_t(r) * n + i];
      moments.count += counts[size_t(r)];
    }
  }
  return kernels::group_norm_apply(x, groups, moments, weight, bias, eps);
}

Tensor decode_by_rows(comm::Communicator& group, const Tensor& latents,
                      const std::function<Tensor(const Tensor&)>& decode) {
  CPDIT_CHECK(latents.defined() && latents.dim() >= 3, invalid_argument,
              "decode_by_rows: latents must be (..., h, w), got ", latents.defined() ? latents.describe() : "undefined");
  const int rows_dim = latents.dim() - 2;
  CPDIT_CHECK(latents.size(rows_dim) >= group.size(), invalid_argument, "a latent of ", latents.size(rows_dim),
              " rows cannot be decoded on ", group.size(), " ranks (each needs at least one row)");
  if (group.size() == 1) return decode(latents);
  const Tensor band = shard(latents, rows_dim, group);
  Tensor out;
  {
    ScopedRowSplit split(group);
    out = decode(band);
  }
  return gather(out, out.dim() - 2, group);
}

}  // namespace cpdit::parallel
