#pragma once
// Context-parallel plans as data: which tensors a model splits across
// the ranks of its context-parallel group, and which it gathers back, named by module path. A plan
// is declared next to its model; nn::enable_parallelism installs it as forward hooks.
#include <map>
#include <optional>
#include <string>

namespace cpdit::parallel {

// Split a tensor along split_dim over the flattened CP group (tensor_split rule: the first S mod P
// ranks get one more); rank g keeps shard g.
struct ContextParallelInput {
  int split_dim = 1;
  // A tensor of another rank is an error, unless `optional`: then the entry applies only to tensors
  // of this rank (Wan's per-token timestep: (B, S) is split, (B,) stays whole).
  std::optional<int> expected_dims;
  bool split_output = false;  // true: splits a forward RESULT (after forward), e.g. RoPE tables
  bool optional = false;
};

// All-gather a forward result along gather_dim, concatenating in rank order.
struct ContextParallelOutput {
  int gather_dim = 1;
  std::optional<int> expected_dims;
};

// What happens at one module path.
struct ModulePlan {
  std::map<std::string, ContextParallelInput> inputs;  // forward arguments by name, split before forward
  std::map<int, ContextParallelInput> outputs;         // results by index, split after (split_output = true)
  std::map<int, ContextParallelOutput> gathers;        // results by index, gathered after forward
};

// Module path -> plan. "" is the model itself, "a.b" a submodule, "blocks.*" every child of the
// list "blocks" (at most one '*').
using ContextParallelPlan = std::map<std::string, ModulePlan>;

}  // namespace cpdit::parallel
