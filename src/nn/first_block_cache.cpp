// diffusers' FirstBlockCache: the head block always runs; its hidden-states residual r_t (output minus
// input) is compared with the one of the last call that ran every block. When
// mean|r_t - r_prev| / mean|r_prev| <= threshold the other blocks are skipped, and each stream (FLUX.1:
// the image and the text) becomes the head block's output plus what the other blocks added to it on
// that call (its tail residual).
#include "nn/step_cache_state.hpp"

#include <cmath>

namespace cpdit::nn::cache_detail {

namespace {

// sum |r - p| and sum |p| over this rank's elements, then over the group's ranks: the two means'
// common count cancels in their quotient, so the reduced quotient is the one over every token.
double relative_l1(const Tensor& residual, const Tensor& previous) {
  const Tensor r = residual.contiguous(), p = previous.contiguous();
  const float *a = r.data<float>(), *b = p.data<float>();
  double changed = 0, magnitude = 0;
  for (int64_t i = 0; i < r.numel(); ++i) {
    changed += std::fabs(double(a[i] - b[i]));  // the difference rounded to f32 first, as diffusers' tensor
    magnitude += std::fabs(double(b[i]));
  }
  const std::vector<double> sums = summed_over_group({changed, magnitude});
  return sums[0] / sums[1];
}

}  // namespace

std::vector<Tensor> first_block_cache_blocks(StepCache::Impl& cache, BranchState& state, CacheDecision& decision,
                                             size_t count, std::vector<Tensor> streams, const BlockStep& block) {
  std::vector<Tensor> head = block(0, streams);
  state.head_splits.resize(streams.size());
  for (size_t k = 0; k < streams.size(); ++k) state.head_splits[k] = head_split(streams[k], head[k]);
  const Tensor residual = difference(head[0], as_head_input(streams[0], state.head_splits[0]));

  bool compute = true;
  if (state.head_residual.defined()) {
    decision.value = relative_l1(residual, state.head_residual);
    compute = decision.value > cache.config.threshold;
  }
  decision.computed = compute;
  if (!compute) {
    for (size_t k = 0; k < head.size(); ++k) head[k] = sum(state.tail_residuals[k], head[k]);
    return head;
  }
  state.head_residual = residual;
  state.head_output = head;
  streams = head;
  for (size_t i = 1; i < count; ++i) streams = block(i, streams);
  state.tail_residuals.resize(streams.size());
  for (size_t k = 0; k < streams.size(); ++k) state.tail_residuals[k] = difference(streams[k], state.head_output[k]);
  return streams;
}

}  // namespace cpdit::nn::cache_detail
