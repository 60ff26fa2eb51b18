#include <cpdit/core/error.hpp>
#include <cpdit/nn/plan_hooks.hpp>

#include <algorithm>

namespace cpdit::nn {

namespace {
// "blocks.*" matches "blocks.3"; "" matches only the root.
bool path_matches(const std::string& pattern, const std::string& path) {
  size_t star = pattern.find('*');
  if (star == std::string::npos) return pattern == path;
  std::string prefix = pattern.substr(0, star), suffix = pattern.substr(star + 1);
  if (path.size() <= prefix.size() + suffix.size()) return false;
  if (path.compare(0, prefix.size(), prefix) != 0) return false;
  if (path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0) return false;
  std::string middle = path.substr(prefix.size(), path.size() - prefix.size() - suffix.size());
  return middle.find('.') == std::string::npos;
}

std::string where(const std::string& path) { return path.empty() ? "the model" : "'" + path + "'"; }

// True when the entry applies to t; throws when t's rank contradicts a non-optional entry.
bool applies(const parallel::ContextParallelInput& spec, const Tensor& t, const std::string& what) {
  if (!t.defined()) return false;
  if (spec.expected_dims && t.dim() != *spec.expected_dims) {
    if (spec.optional) return false;
    fail(ErrorKind::invalid_argument, "context-parallel plan: ", what, " is ", t.describe(), " with ", t.dim(),
         " dims, but the plan splits ", *spec.expected_dims, "-dim tensors on dim ", spec.split_dim,
         "; pass a ", *spec.expected_dims, "-dim tensor");
  }
  CPDIT_CHECK(spec.split_dim >= 0 && spec.split_dim < t.dim(), invalid_argument, "context-parallel plan: ", what,
              " is ", t.describe(), ", which has no dim ", spec.split_dim, " to split");
  return true;
}

void install_one(Module& m, const std::string& path, const parallel::ModulePlan& plan, const TokenExchange& ex) {
  if (!plan.inputs.empty()) {
    m.add_pre_hook(kPlanHookTag, [plan, path, ex](TensorMap& inputs) {
      for (const auto& [name, spec] : plan.inputs) {
        auto it = inputs.find(name);
        CPDIT_CHECK(it != inputs.end(), invalid_argument, "context-parallel plan: the forward of ", where(path),
                    " takes no argument '", name, "'");
        if (applies(spec, it->second, "input '" + name + "' of " + where(path)))
          it->second = ex.shard(it->second, spec.split_dim);
      }
    });
  }
  if (plan.outputs.empty() && plan.gathers.empty()) return;
  m.add_post_hook(kPlanHookTag, [plan, path, ex](std::vector<Tensor>& outputs) {
    auto output = [&](int index) -> Tensor& {
      CPDIT_CHECK(index >= 0 && size_t(index) < outputs.size(), invalid_argument, "context-parallel plan: ",
                  where(path), " returns ", outputs.size(), " tensors, there is no output ", index);
      return outputs[size_t(index)];
    };
    for (const auto& [index, spec] : plan.outputs) {
      Tensor& t = output(index);
      if (applies(spec, t, "output " + std::to_string(index) + " of " + where(path))) t = ex.shard(t, spec.split_dim);
    }
    for (const auto& [index, spec] : plan.gathers) {
      Tensor& t = output(index);
      if (!t.defined()) continue;
      std::string what = "output " + std::to_string(index) + " of " + where(path);
      CPDIT_CHECK(!spec.expected_dims || t.dim() == *spec.expected_dims, invalid_argument, "context-parallel plan: ",
                  what, " is ", t.describe(), ", but the plan gathers ", spec.expected_dims.value_or(0),
                  "-dim tensors");
      CPDIT_CHECK(spec.gather_dim >= 0 && spec.gather_dim < t.dim(), invalid_argument, "context-parallel plan: ",
                  what, " is ", t.describe(), ", which has no dim ", spec.gather_dim, " to gather");
      t = ex.gather(t, spec.gather_dim);
    }
  });
}
}  // namespace

void install_plan(Module& root, const parallel::ContextParallelPlan& plan, const TokenExchange& exchange) {
  auto modules = root.named_modules();
  // Check the whole plan before touching any module.
  for (const auto& [pattern, entry] : plan) {
    CPDIT_CHECK(std::count(pattern.begin(), pattern.end(), '*') <= 1, invalid_argument,
                "context-parallel plan: path '", pattern, "' has more than one '*'");
    bool found = false;
    for (const auto& [path, m] : modules) found = found || path_matches(pattern, path);
    CPDIT_CHECK(found, invalid_argument, "context-parallel plan: no module matches '", pattern, "'");
    for (const auto& [name, spec] : entry.inputs)
      CPDIT_CHECK(!spec.split_output, invalid_argument, "context-parallel plan: input '", name, "' at '", pattern,
                  "' is marked split_output; list it under outputs");
    for (const auto& [index, spec] : entry.outputs)
      CPDIT_CHECK(spec.split_output, invalid_argument, "context-parallel plan: output ", index, " at '", pattern,
                  "' splits a result, so it must be marked split_output");
  }
  remove_plan(root);
  for (const auto& [pattern, entry] : plan)
    for (const auto& [path, m] : modules)
      if (path_matches(pattern, path)) install_one(*m, path, entry, exchange);
}

void remove_plan(Module& root) {
  for (auto& [path, m] : root.named_modules()) m->remove_hooks(kPlanHookTag);
}

}  // namespace cpdit::nn
