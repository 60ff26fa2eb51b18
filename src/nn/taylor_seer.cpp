// diffusers' TaylorSeer: a hooked module computes on its first calls and every cache_interval-th after;
// on the others its outputs are predicted as sum_k f_k offset^k / k!, the factors f_k the divided
// differences of its outputs over the calls that computed them, kept in bf16 (diffusers' default) or
// f32. The schedule depends on the call count alone, so every rank of every split predicts on the same
// calls; a prediction is per token and needs no other rank's.
#include "nn/step_cache_state.hpp"

#include <cpdit/core/error.hpp>

#include <cmath>
#include <regex>

namespace cpdit::nn {

namespace cache_detail {
namespace {

// diffusers' schedule; Python's % (never negative) for the calls just after the warm-up.
bool computes(const StepCacheConfig& c, int step) {
  const int n = c.cache_interval, since = step - c.disable_cache_before_step - 1;
  return step < c.disable_cache_before_step || ((since % n) + n) % n == 0 ||
         (c.disable_cache_after_step >= 0 && step >= c.disable_cache_after_step);
}

// `t` in the factors' dtype, as PyTorch's .to() (bf16 rounds to nearest even); a copy, never the
// module's own output, which the block may go on to change.
Tensor as_factor(const Tensor& t, bool f32) { return f32 ? t.clone() : t.to(DType::bf16); }

// `t` in f32 in memory of its own (to() hands back `t` itself when it is f32 already).
Tensor owned_f32(const Tensor& t) {
  Tensor f = t.to(DType::f32);
  return f.same_storage(t) ? f.clone() : f;
}

// (a - b) / delta elementwise in f32, each operation rounded as PyTorch's.
Tensor divided_difference(const Tensor& a, const Tensor& b, int delta) {
  const Tensor d = difference(a, b);
  float* p = d.data<float>();
  const float by = float(delta);
  for (int64_t i = 0; i < d.numel(); ++i) p[i] /= by;
  return d;
}

void update(TaylorState& s, const StepCacheConfig& c, const std::vector<Tensor>& outputs) {
  s.dtypes.clear();
  s.factors.resize(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    s.dtypes.push_back(outputs[i].dtype());
    std::vector<Tensor> fresh{outputs[i].to(DType::f32).contiguous()};
    if (s.last_update_step >= 0) {
      const int delta = s.current_step - s.last_update_step;
      const std::vector<Tensor>& previous = s.factors[i];
      for (int j = 0; j < c.max_order && size_t(j) < previous.size(); ++j)
        fresh.push_back(divided_difference(fresh[size_t(j)], previous[size_t(j)], delta));
    }
    for (Tensor& f : fresh) f = as_factor(f, c.f32_factors);
    s.factors[i] = std::move(fresh);
  }
  s.last_update_step = s.current_step;
}

// f_0 + f_1 offset + f_2 offset^2 / 2 + ...: each term's coefficient a Python float cast to f32, each
// product and each sum rounded in f32 as PyTorch's separate operations (never fused into one FMA;
// diffusers starts from zeros, which adds nothing).
std::vector<Tensor> predict(const TaylorState& s) {
  const int offset = s.current_step - s.last_update_step;
  std::vector<Tensor> outputs;
  for (size_t i = 0; i < s.factors.size(); ++i) {
    const std::vector<Tensor>& factors = s.factors[i];
    Tensor out = factors[0].to(DType::f32);
    double factorial = 1;
    for (size_t order = 1; order < factors.size(); ++order) {
      factorial *= double(order);
      const float coefficient = float(std::pow(double(offset), double(order)) / factorial);
      Tensor term = owned_f32(factors[order]);
      float* t = term.data<float>();
      for (int64_t e = 0; e < term.numel(); ++e) t[e] *= coefficient;
      out = sum(out, term);
    }
    // A new tensor, never the factor itself (order 0 alone, in f32), which the block may go on to change.
    const Tensor predicted = out.to(s.dtypes[i]);
    outputs.push_back(predicted.same_storage(factors[0]) ? predicted.clone() : predicted);
  }
  return outputs;
}

}  // namespace

std::vector<Tensor> taylor_seer_call(StepCache::Impl& cache, const std::string& path, const TensorMap& inputs,
                                     const Module::Body& body) {
  TaylorState& s = cache.branches[size_t(bound_branch())].taylor[path];
  const bool compute = computes(cache.config, ++s.current_step);
  // The call's decision, which run_blocks opened (a module outside the blocks, after them, counts in it).
  CacheDecision* decision = cache.report.decisions.empty() ? nullptr : &cache.report.decisions.back();
  if (compute) {
    std::vector<Tensor> outputs = body(inputs);
    update(s, cache.config, outputs);
    if (decision != nullptr) ++decision->modules_computed;
    return outputs;
  }
  CPDIT_CHECK(s.last_update_step >= 0, internal, "TaylorSeer: ", path, " predicted before it ever computed");
  if (decision != nullptr) {
    ++decision->modules_predicted;
    decision->computed = false;
  }
  return predict(s);
}

}  // namespace cache_detail

std::vector<std::string> matching_modules(Module& model, const std::vector<std::string>& patterns) {
  std::vector<std::regex> compiled;
  for (const std::string& p : patterns) {
    try {
      compiled.emplace_back(p, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      fail(ErrorKind::invalid_argument, "TaylorSeer: '", p, "' is not a regex (", e.what(), ")");
    }
  }
  std::vector<std::string> paths;
  for (const auto& [path, module] : model.named_modules())
    for (const std::regex& r : compiled)
      if (std::regex_match(path, r)) {
        paths.push_back(path);
        break;
      }
  return paths;
}

int hook_taylor_seer(Module& model, const StepCacheConfig& config) {
  const std::vector<std::string> paths = matching_modules(model, config.modules);
  for (const std::string& path : paths) {
    model.find(path)->add_around_hook("step_cache", [path](const TensorMap& in, const Module::Body& body) {
      StepCache* cache = cache_detail::bound_cache();
      if (cache == nullptr || cache->config().kind != StepCacheConfig::Kind::taylor_seer) return body(in);
      return cache_detail::taylor_seer_call(cache->impl(), path, in, body);
    });
  }
  return int(paths.size());
}

}  // namespace cpdit::nn
