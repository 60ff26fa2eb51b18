#pragma once
// Installing a context-parallel plan (parallel/plan.hpp) on a module tree as forward hooks: split
// named inputs before a module's forward, split or gather its results after. The hooks only move
// tensors; what "this rank's part" and "gather" mean comes from a TokenExchange, so the machinery
// is testable without ranks and the model code never sees them.
#include <cpdit/nn/module.hpp>
#include <cpdit/parallel/plan.hpp>

#include <functional>

namespace cpdit::nn {

struct TokenExchange {
  std::function<Tensor(const Tensor&, int dim)> shard;   // this rank's part along dim
  std::function<Tensor(const Tensor&, int dim)> gather;  // every rank's part, concatenated in rank order
};

inline const std::string kPlanHookTag = "context_parallel";

// Replaces hooks an earlier plan installed. Refuses (invalid_argument) a path that matches no module
// and an entry whose split_output flag contradicts where it sits. At forward time: an input the
// forward does not take is an error; an undefined (not passed) tensor is left alone; a tensor whose
// rank differs from expected_dims is an error unless the entry is optional (then it is left whole).
void install_plan(Module& root, const parallel::ContextParallelPlan& plan, const TokenExchange& exchange);
void remove_plan(Module& root);

}  // namespace cpdit::nn
