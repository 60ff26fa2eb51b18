#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/parallel/halo.hpp>
#include <cpdit/parallel/shared_linear.hpp>

#include <algorithm>

namespace cpdit::parallel {

namespace {
// Shares start on whole runs of 64 features: the bf16 products block features by 32 and the few-token
// one reads rows 4 at a time, so a share computes its features as the whole layer does.
constexpr int64_t kShareRun = 64;
}  // namespace

Tensor shared_linear(const Tensor& x, const Weight& weight, const Tensor& bias) {
  comm::Communicator* group = row_split_group();
  if (group == nullptr || group->size() == 1) return kernels::linear(x, weight, bias);
  CPDIT_CHECK(weight.defined() && weight.shape().size() == 2 && x.dim() >= 1, invalid_argument,
              "shared linear: weight must be (out, in), got ", weight.describe());
  const int64_t n = weight.shape()[0], rows = x.numel() / std::max<int64_t>(x.size(-1), 1);
  const int64_t ranks = group->size();
  const int64_t per_rank = ((n + ranks - 1) / ranks + kShareRun - 1) / kShareRun * kShareRun;
  auto count_of = [&](int64_t rank) { return std::clamp<int64_t>(n - rank * per_rank, 0, per_rank); };
  const int64_t first = per_rank * group->rank(), count = count_of(group->rank());
  // Every rank sends per_rank features a row (zeros past its count), so one fixed-size gather serves.
  Tensor part = Tensor::zeros({rows, per_rank});
  if (count > 0) {
    const Tensor own_bias = bias.defined() ? bias.narrow(0, first, count) : Tensor();
    const Tensor y = kernels::linear(x, weight.narrow_rows(first, count), own_bias);
    part.narrow(1, 0, count).copy_(y.reshape({rows, count}));
  }
  Tensor all = Tensor::empty({ranks, rows, per_rank});
  group->all_gather(part.raw(), size_t(part.nbytes()), all.raw());
  Shape shape = x.shape();
  shape.back() = n;
  Tensor out = Tensor::empty({rows, n});
  for (int64_t r = 0; r < ranks; ++r)
    if (const int64_t c = count_of(r); c > 0) out.narrow(1, r * per_rank, c).copy_(all.select(0, r).narrow(1, 0, c));
  return out.reshape(shape);
}

}  // namespace cpdit::parallel
