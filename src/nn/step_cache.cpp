#include "nn/step_cache_state.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/parallel/context.hpp>

namespace cpdit::nn {

namespace {
thread_local StepCache* t_cache = nullptr;
thread_local int t_branch = 0;
}  // namespace

int StepCacheReport::computed() const {
  int n = 0;
  for (const CacheDecision& d : decisions) n += d.computed;
  return n;
}

int StepCacheReport::skipped() const { return int(decisions.size()) - computed(); }

int StepCacheReport::modules_computed() const {
  int n = 0;
  for (const CacheDecision& d : decisions) n += d.modules_computed;
  return n;
}

int StepCacheReport::modules_predicted() const {
  int n = 0;
  for (const CacheDecision& d : decisions) n += d.modules_predicted;
  return n;
}

StepCache::StepCache(StepCacheConfig config, int steps) : impl_(std::make_unique<Impl>()) {
  CPDIT_CHECK(steps >= 1, invalid_argument, "a step cache needs at least 1 step, got ", steps);
  impl_->steps = steps;
  if (config.kind == StepCacheConfig::Kind::mag && !config.calibrate) {
    CPDIT_CHECK(!config.mag_ratios.empty(), invalid_argument,
                "MagCache needs its per-step ratios: run once with --cache magcache:calibrate and pass them as "
                "ratios=a/b/c");
    impl_->ratios = nearest_interp(config.mag_ratios, steps);
  }
  if (config.kind == StepCacheConfig::Kind::taylor_seer)
    CPDIT_CHECK(config.cache_interval >= 1 && config.disable_cache_before_step >= 0 && config.max_order >= 0,
                invalid_argument, "TaylorSeer needs interval >= 1, before >= 0 and order >= 0");
  impl_->config = std::move(config);
}

StepCache::~StepCache() = default;
const StepCacheConfig& StepCache::config() const { return impl_->config; }
const StepCacheReport& StepCache::report() const { return impl_->report; }

ScopedStepCache::ScopedStepCache(StepCache* cache) : previous_(t_cache) { t_cache = cache; }
ScopedStepCache::~ScopedStepCache() { t_cache = previous_; }

ScopedCacheBranch::ScopedCacheBranch(int branch) : previous_(t_branch) {
  CPDIT_CHECK(branch == 0 || branch == 1, internal, "a guidance branch is 0 or 1, got ", branch);
  t_branch = branch;
}
ScopedCacheBranch::~ScopedCacheBranch() { t_branch = previous_; }

namespace cache_detail {

StepCache* bound_cache() { return t_cache; }
int bound_branch() { return t_branch; }

std::vector<double> summed_over_group(std::vector<double> local) {
  parallel::ParallelContext* context = parallel::current_context();
  if (context == nullptr || context->mesh().flat().size() == 1) return local;
  comm::Communicator& group = context->mesh().flat();
  // An all-gather and one sum in rank order: the same f64 additions on every rank (the communicators'
  // all_reduce has no f64), so every rank holds bitwise the same sums.
  const size_t n = local.size();
  std::vector<double> every(n * size_t(group.size()));
  group.all_gather(local.data(), n * sizeof(double), every.data());
  std::vector<double> sums(n, 0.0);
  for (int r = 0; r < group.size(); ++r)
    for (size_t i = 0; i < n; ++i) sums[i] += every[size_t(r) * n + i];
  return sums;
}

bool head_split(const Tensor& input, const Tensor& output) {
  return parallel::current_context() != nullptr && input.dim() >= 2 && output.dim() >= 2 &&
         output.size(1) < input.size(1);
}

Tensor as_head_input(const Tensor& input, bool splits) {
  return splits ? parallel::current_context()->shard(input, 1) : input;
}

Tensor difference(const Tensor& a, const Tensor& b) {
  CPDIT_CHECK(a.shape() == b.shape(), internal, "step cache: ", a.describe(), " minus ", b.describe());
  const Tensor x = a.to(DType::f32).contiguous(), y = b.to(DType::f32).contiguous();
  Tensor out = Tensor::empty(x.shape(), DType::f32);
  const float *p = x.data<float>(), *q = y.data<float>();
  float* o = out.data<float>();
  for (int64_t i = 0; i < out.numel(); ++i) o[i] = p[i] - q[i];
  return out;
}

Tensor sum(const Tensor& a, const Tensor& b) {
  CPDIT_CHECK(a.shape() == b.shape(), internal, "step cache: ", a.describe(), " plus ", b.describe());
  const Tensor x = a.to(DType::f32).contiguous(), y = b.to(DType::f32).contiguous();
  Tensor out = Tensor::empty(x.shape(), DType::f32);
  const float *p = x.data<float>(), *q = y.data<float>();
  float* o = out.data<float>();
  for (int64_t i = 0; i < out.numel(); ++i) o[i] = p[i] + q[i];
  return out;
}

}  // namespace cache_detail

std::vector<Tensor> run_blocks(size_t count, std::vector<Tensor> streams, const BlockStep& block) {
  StepCache* cache = cache_detail::bound_cache();
  // diffusers' block caches hold a head and a distinct tail block; one block has nothing to skip.
  const StepCacheConfig::Kind kind = cache == nullptr ? StepCacheConfig::Kind::none : cache->config().kind;
  if (kind == StepCacheConfig::Kind::none || (count < 2 && kind != StepCacheConfig::Kind::taylor_seer)) {
    for (size_t i = 0; i < count; ++i) streams = block(i, streams);
    return streams;
  }
  StepCache::Impl& impl = cache->impl();
  const int branch = cache_detail::bound_branch();
  BranchState& state = impl.branches[size_t(branch)];
  CacheDecision decision;
  decision.branch = branch;
  decision.call = state.calls++;
  if (impl.config.kind == StepCacheConfig::Kind::taylor_seer) {
    // Every block runs; the hooked modules inside predict or compute, and mark this call's decision.
    impl.report.decisions.push_back(decision);
    for (size_t i = 0; i < count; ++i) streams = block(i, streams);
    return streams;
  }
  streams = impl.config.kind == StepCacheConfig::Kind::first_block
                ? cache_detail::first_block_cache_blocks(impl, state, decision, count, std::move(streams), block)
                : cache_detail::mag_cache_blocks(impl, state, decision, count, std::move(streams), block);
  impl.report.decisions.push_back(decision);
  return streams;
}

}  // namespace cpdit::nn
