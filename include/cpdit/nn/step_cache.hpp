#pragma once
// Step caches: on the denoising steps where a transformer's blocks would change little, skip them and
// reuse what they added the last time they ran — diffusers' FirstBlockCache and MagCache hooks, with
// their decisions — or predict chosen modules' outputs from a Taylor series over the steps that ran
// them (diffusers' TaylorSeer, whose schedule is fixed by the step count: every rank agrees by design). Each family's forward runs its blocks through run_blocks, the one place a cache
// plugs in; the pipeline binds one StepCache per rank for a run (ScopedStepCache) and names the guidance
// pass each transformer call belongs to (ScopedCacheBranch), as diffusers' cache contexts "cond" and
// "uncond" keep the two passes' states apart.
//
// Under context parallelism each rank holds only some tokens, so a data-dependent test is made on sums
// over every token: FirstBlockCache's numerator and denominator are summed over this rank's tokens, then
// over the ranks of the model's group (in f64, in rank order), before the quotient. Every rank of every
// split compares the same number, so all take the same decision at every step.
#include <cpdit/core/tensor.hpp>
#include <cpdit/nn/module.hpp>

#include <cmath>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace cpdit::nn {

struct StepCacheConfig {
  enum class Kind { none, first_block, mag, taylor_seer };
  Kind kind = Kind::none;
  // FirstBlockCache: skip when mean|r_t - r_prev| / mean|r_prev| <= threshold, r the first block's
  // residual (default 0.05 as diffusers'). MagCache: the accumulated error allowed (default 0.06).
  double threshold = 0;
  int max_skip_steps = 3;          // MagCache: consecutive skips at most
  double retention_ratio = 0.2;    // MagCache: the share of first steps never skipped
  std::vector<float> mag_ratios;   // MagCache: per step, nearest-interpolated to the run's steps
  bool calibrate = false;          // MagCache: skip nothing, measure the ratios and report them
  // TaylorSeer (diffusers' TaylorSeerCacheConfig): each hooked module computes on its first
  // `disable_cache_before_step` calls and every `cache_interval`-th after, from `disable_cache_after_step`
  // on (-1: never) always; between, its outputs are predicted to order `max_order` from factors kept in
  // bf16 (diffusers' default) or f32. The modules are those whose dotted paths fully match one of
  // `modules` (ECMAScript regexes; empty: the family's defaults).
  int cache_interval = 5;
  int disable_cache_before_step = 3;
  int disable_cache_after_step = -1;
  int max_order = 1;
  bool f32_factors = false;
  std::vector<std::string> modules;
};

// diffusers' TaylorSeer defaults: the attention modules of blocks named as diffusers' transformers name
// them. Wan's attentions (blocks.N.attn1, attn2) end in a digit and match none; its family names them.
const std::vector<std::string>& taylor_seer_default_modules();

// "fbcache[:T]", "magcache[:T][,key=value...]" (keys threshold, max_skip_steps, retention_ratio,
// ratios=a/b/c, and the word calibrate), "taylorseer[:key=value...]" (interval, before, after, order,
// factors=bf16|f32, module=REGEX, repeatable). Bad specs throw invalid_argument with a one-line message.
StepCacheConfig parse_step_cache(const std::string& spec);
// The spec back, as the summary names it: "fbcache:0.08", "magcache:0.06", "magcache:calibrate",
// "taylorseer:interval=5,before=3,order=1".
std::string step_cache_name(const StepCacheConfig& config);
// diffusers' nearest_interp: `ratios` resampled to `steps` entries, index round(i (n-1)/(steps-1)) in f32.
std::vector<float> nearest_interp(const std::vector<float>& ratios, int steps);

// One transformer call's decision, as one rank took it.
struct CacheDecision {
  int branch = 0;  // 0: the conditional pass (or the only one), 1: the unconditional one
  int call = 0;    // the call's place among its branch's calls
  // FirstBlockCache: the relative L1 compared; MagCache: the accumulated error; NaN: no test was made
  double value = std::nan("");
  bool computed = true;  // TaylorSeer: false when a hooked module's outputs were predicted
  int modules_computed = 0, modules_predicted = 0;  // TaylorSeer's hooked modules in this call
};

struct StepCacheReport {
  std::vector<CacheDecision> decisions;  // in call order
  // MagCache calibrate: per branch, the ratios measured at each computed call so far (the first 1.0)
  std::vector<std::vector<double>> calibrated_ratios;
  int computed() const;
  int skipped() const;
  int modules_computed() const;   // TaylorSeer's hooked modules' calls that ran
  int modules_predicted() const;  // and those predicted
};

// One rank's cache over one run of `steps` denoising steps: a state per guidance branch.
class StepCache {
 public:
  StepCache(StepCacheConfig config, int steps);
  ~StepCache();
  StepCache(const StepCache&) = delete;
  StepCache& operator=(const StepCache&) = delete;
  const StepCacheConfig& config() const;
  const StepCacheReport& report() const;

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// Binds `cache` on the calling thread (the rank's) while it lives; nests, null unbinds.
class ScopedStepCache {
 public:
  explicit ScopedStepCache(StepCache* cache);
  ~ScopedStepCache();
  ScopedStepCache(const ScopedStepCache&) = delete;
  ScopedStepCache& operator=(const ScopedStepCache&) = delete;

 private:
  StepCache* previous_;
};

// The guidance branch the transformer calls made while it lives belong to (0 outside any).
class ScopedCacheBranch {
 public:
  explicit ScopedCacheBranch(int branch);
  ~ScopedCacheBranch();
  ScopedCacheBranch(const ScopedCacheBranch&) = delete;
  ScopedCacheBranch& operator=(const ScopedCacheBranch&) = delete;

 private:
  int previous_;
};

// Hooks TaylorSeer on the modules of `model` (a rank's replica) that `config.modules` match; returns
// how many. The hooks act while a TaylorSeer StepCache is bound on the thread, and run the module
// otherwise.
int hook_taylor_seer(Module& model, const StepCacheConfig& config);
// The paths in `model` that one of `patterns` fully matches (a bad regex throws invalid_argument).
std::vector<std::string> matching_modules(Module& model, const std::vector<std::string>& patterns);

// Block `index` of a transformer on the streams it carries (FLUX.1: {image, text}; Wan: {tokens}),
// returning the same streams.
using BlockStep = std::function<std::vector<Tensor>(size_t index, const std::vector<Tensor>& streams)>;

// Blocks [0, count) over `streams`, as a transformer forward's loop runs them, through the cache bound
// on this thread (none: every block runs). Stream 0 is the hidden states the caches measure; a skip
// adds the cached residual of every stream. Inside a model's forward: its rank group is the one the
// sums are reduced over, and a head block whose plan splits its inputs (Wan's blocks.0, as diffusers'
// plan) is measured against its input as split.
std::vector<Tensor> run_blocks(size_t count, std::vector<Tensor> streams, const BlockStep& block);

}  // namespace cpdit::nn
