// The context bound on a thread (context.hpp), the row split's group and its GroupNorm statistics
// (halo.hpp).
#include <cpdit/parallel/context.hpp>
#include <cpdit/parallel/halo.hpp>

#include <vector>

namespace cpdit::parallel {
namespace {
thread_local ParallelContext* bound_context = nullptr;
}

ScopedContext::ScopedContext(ParallelContext* context) : previous_(bound_context) { bound_context = context; }
ScopedContext::~ScopedContext() { bound_context = previous_; }
ParallelContext* current_context() { return bound_context; }

comm::Communicator* row_split_group() {
  ParallelContext* context = current_context();
  return context ? &context->mesh().flat() : nullptr;
}

Tensor group_norm_rows(const Tensor& x, int64_t groups, const Tensor& weight, const Tensor& bias, float eps) {
  kernels::GroupMoments moments = kernels::group_moments(x, groups);
  comm::Communicator* group = row_split_group();
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

}  // namespace cpdit::parallel
