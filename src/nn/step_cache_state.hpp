#pragma once
// What a StepCache keeps between transformer calls (one BranchState per guidance branch), and the two
// caches' block loops that run_blocks hands a call to.
#include <cpdit/nn/step_cache.hpp>

#include <array>
#include <map>
#include <string>
#include <vector>

namespace cpdit::nn {

// TaylorSeer's state of one hooked module (diffusers' TaylorSeerState).
struct TaylorState {
  int current_step = -1;      // this module's calls so far, less one
  int last_update_step = -1;  // the call that last computed it (-1: none yet)
  std::vector<std::vector<Tensor>> factors;  // per output, per order: bf16 or f32
  std::vector<DType> dtypes;                 // per output, as the module returned it
};

struct BranchState {
  int calls = 0;  // this branch's transformer calls so far
  // Per stream: whether the head block's plan splits that input (Wan's blocks.0), learned on a call
  // that ran the head block; a skipped head block is never called, so its input is split here.
  std::vector<bool> head_splits;

  // FirstBlockCache: of the last call that computed every block.
  Tensor head_residual;                // the head block's hidden-states residual
  std::vector<Tensor> head_output;     // the head block's output streams
  std::vector<Tensor> tail_residuals;  // the last block's outputs minus the head block's

  // MagCache, in diffusers' f32 arithmetic.
  Tensor previous_residual;  // the last block's hidden states minus the head block's input
  float accumulated_ratio = 1.0f, accumulated_err = 0.0f;
  int accumulated_steps = 0;
  int step_index = 0;
  std::vector<double> calibration;

  std::map<std::string, TaylorState> taylor;  // TaylorSeer's, by module path
};

struct StepCache::Impl {
  StepCacheConfig config;
  int steps = 0;
  std::vector<float> ratios;  // MagCache's, interpolated to `steps`
  std::array<BranchState, 2> branches;
  StepCacheReport report;
};

namespace cache_detail {

// The cache bound on this thread and the branch its calls go to.
StepCache* bound_cache();
int bound_branch();

// Each value summed over this rank's model group (the bound parallel context's ranks, which hold
// different tokens), in f64 and rank order, so every rank gets the same sums; `local` when no context.
std::vector<double> summed_over_group(std::vector<double> local);
// `input` as the head block saw it: split along the tokens (dim 1) when `splits`.
Tensor as_head_input(const Tensor& input, bool splits);
// Whether the head block's plan split `input` into `output` (shorter along the tokens under a context).
bool head_split(const Tensor& input, const Tensor& output);
// Elementwise f32, as PyTorch rounds each: a - b and a + b (same shapes).
Tensor difference(const Tensor& a, const Tensor& b);
Tensor sum(const Tensor& a, const Tensor& b);

std::vector<Tensor> first_block_cache_blocks(StepCache::Impl& cache, BranchState& state, CacheDecision& decision,
                                             size_t count, std::vector<Tensor> streams, const BlockStep& block);
// A TaylorSeer-hooked module's call on this thread's branch: `body` run (and the factors updated) or
// its outputs predicted, counted in the call's decision.
std::vector<Tensor> taylor_seer_call(StepCache::Impl& cache, const std::string& path, const TensorMap& inputs,
                                     const Module::Body& body);
std::vector<Tensor> mag_cache_blocks(StepCache::Impl& cache, BranchState& state, CacheDecision& decision,
                                     size_t count, std::vector<Tensor> streams, const BlockStep& block);

}  // namespace cache_detail
}  // namespace cpdit::nn
