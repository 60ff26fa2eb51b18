// diffusers' MagCache: from the retention step on, each call multiplies an accumulated ratio by the
// step's magnitude ratio and adds |1 - ratio| to an accumulated error; while a residual is cached, the
// error is at most the threshold and at most max_skip_steps calls have accumulated, every block is
// skipped and the hidden states become the head block's input plus the cached residual (the last
// block's hidden states minus the head block's input on the last computed call); otherwise the
// accumulators restart and every block runs. The decision reads no tensor, so every rank takes it
// alike; calibration's ratio (the mean over tokens of |r_t| / |r_prev| per token) is summed over the
// ranks' tokens.
#include "nn/step_cache_state.hpp"

#include <cmath>

namespace cpdit::nn::cache_detail {

namespace {

// mean over tokens of ‖current‖ / (‖previous‖ + 1e-8), each norm over the last dim (f32 sums of
// squares in f64 here; the ratio is reported, not compared).
double mean_norm_ratio(const Tensor& current, const Tensor& previous) {
  const Tensor c = current.contiguous(), p = previous.contiguous();
  const int64_t width = c.size(-1), tokens = width ? c.numel() / width : 0;
  double ratios = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    double cc = 0, pp = 0;
    for (int64_t i = 0; i < width; ++i) {
      cc += double(c.data<float>()[t * width + i]) * c.data<float>()[t * width + i];
      pp += double(p.data<float>()[t * width + i]) * p.data<float>()[t * width + i];
    }
    ratios += float(std::sqrt(cc)) / (float(std::sqrt(pp)) + 1e-8f);
  }
  const std::vector<double> sums = summed_over_group({ratios, double(tokens)});
  return sums[0] / sums[1];
}

void restart(BranchState& s) {
  s.accumulated_ratio = 1.0f;
  s.accumulated_err = 0.0f;
  s.accumulated_steps = 0;
}

// The tail's step count: after the run's last step the state starts over, as diffusers' does. The
// report holds the calibration so far at every call, so a loop that runs fewer steps (image-to-image's
// strength) still reports what it measured.
void advance(StepCache::Impl& cache, BranchState& s, int branch) {
  if (cache.config.calibrate) {
    auto& reported = cache.report.calibrated_ratios;
    if (reported.size() <= size_t(branch)) reported.resize(size_t(branch) + 1);
    reported[size_t(branch)] = s.calibration;
  }
  if (++s.step_index < cache.steps) return;
  s.step_index = 0;
  restart(s);
  s.previous_residual = Tensor();
  s.calibration.clear();
}

}  // namespace

std::vector<Tensor> mag_cache_blocks(StepCache::Impl& cache, BranchState& state, CacheDecision& decision,
                                     size_t count, std::vector<Tensor> streams, const BlockStep& block) {
  const StepCacheConfig& config = cache.config;
  bool compute = true;
  if (!config.calibrate) {
    const int step = state.step_index;
    const float scale = size_t(step) < cache.ratios.size() ? cache.ratios[size_t(step)] : 1.0f;
    const int retention_step = int(config.retention_ratio * cache.steps + 0.5);
    if (step >= retention_step) {
      state.accumulated_ratio *= scale;
      state.accumulated_steps += 1;
      state.accumulated_err += std::fabs(1.0f - state.accumulated_ratio);
      // diffusers compares its f32 error tensor with the threshold rounded to f32.
      if (state.previous_residual.defined() && state.accumulated_err <= float(config.threshold) &&
          state.accumulated_steps <= config.max_skip_steps)
        compute = false;
      else
        restart(state);
    }
  }
  decision.value = state.accumulated_err;
  decision.computed = compute;

  if (!compute) {
    // The head block's input, split as its plan splits it; the other streams pass through unchanged.
    for (size_t k = 0; k < streams.size(); ++k) streams[k] = as_head_input(streams[k], state.head_splits[k]);
    streams[0] = sum(streams[0], state.previous_residual);
    advance(cache, state, decision.branch);
    return streams;
  }
  std::vector<Tensor> head = block(0, streams);
  state.head_splits.resize(streams.size());
  for (size_t k = 0; k < streams.size(); ++k) state.head_splits[k] = head_split(streams[k], head[k]);
  const Tensor input = as_head_input(streams[0], state.head_splits[0]);
  streams = head;
  for (size_t i = 1; i < count; ++i) streams = block(i, streams);
  const Tensor residual = difference(streams[0], input);
  if (config.calibrate)
    state.calibration.push_back(state.previous_residual.defined() ? mean_norm_ratio(residual, state.previous_residual)
                                                                  : 1.0);
  state.previous_residual = residual;
  advance(cache, state, decision.branch);
  return streams;
}

}  // namespace cpdit::nn::cache_detail
