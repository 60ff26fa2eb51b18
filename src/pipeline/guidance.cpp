#include <cpdit/comm/tensor_ops.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/nn/step_cache.hpp>
#include <cpdit/pipeline/guidance.hpp>
#include <cpdit/pipeline/scheduler_common.hpp>

#include <cmath>

namespace cpdit::pipeline {

namespace {

CPDIT_SEPARATE_ROUNDING void combine(const float* cond, const float* uncond, float scale, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float difference = cond[i] - uncond[i];
    const float scaled = scale * difference;
    out[i] = uncond[i] + scaled;
  }
}

float norm(const float* x, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += double(x[i]) * double(x[i]);
  return float(std::sqrt(sum));
}

}  // namespace

Tensor combine_guidance(const Tensor& cond, const Tensor& uncond, const GuidanceCombine& how) {
  CPDIT_CHECK(cond.shape() == uncond.shape() && cond.dim() >= 1, invalid_argument,
              "guidance: the conditional prediction ", cond.describe(), " and the unconditional one ",
              uncond.describe(), " must have the same shape");
  const Tensor c = cond.to(DType::f32).contiguous(), u = uncond.to(DType::f32).contiguous();
  Tensor out = Tensor::empty(c.shape(), DType::f32);
  combine(c.data<float>(), u.data<float>(), how.scale, out.data<float>(), out.numel());
  if (!how.rescale_to_cond_norm) return out;
  const int64_t channels = c.size(c.dim() - 1), rows = channels ? c.numel() / channels : 0;
  for (int64_t r = 0; r < rows; ++r) {
    float* v = out.data<float>() + r * channels;
    const float combined_norm = norm(v, channels);
    if (combined_norm == 0.0f) continue;
    const float ratio = norm(c.data<float>() + r * channels, channels) / combined_norm;
    for (int64_t i = 0; i < channels; ++i) v[i] *= ratio;
  }
  return out;
}

GuidancePair predict_cond_uncond(const std::function<Tensor()>& predict_cond_pass,
                                 const std::function<Tensor()>& predict_uncond_pass, comm::Communicator* cfg) {
  // A step cache keeps the two passes apart, as diffusers' cache contexts "cond" and "uncond" do.
  auto predict_cond = [&] {
    const nn::ScopedCacheBranch branch(0);
    return predict_cond_pass();
  };
  auto predict_uncond = [&] {
    const nn::ScopedCacheBranch branch(1);
    return predict_uncond_pass();
  };
  if (cfg == nullptr || cfg->size() == 1) {
    Tensor cond = predict_cond();
    return {cond, predict_uncond()};
  }
  CPDIT_CHECK(cfg->size() == 2, invalid_argument, "CFG-parallel guidance needs 2 rank groups, got ", cfg->size());
  const bool conditional = cfg->rank() == 0;
  const int peer = 1 - cfg->rank();
  const Tensor mine = (conditional ? predict_cond() : predict_uncond()).contiguous();
  Tensor theirs = Tensor::empty(mine.shape(), mine.dtype());
  auto sending = comm::isend(*cfg, mine, peer);
  comm::recv(*cfg, theirs, peer);
  sending->wait();
  return conditional ? GuidancePair{mine, theirs} : GuidancePair{theirs, mine};
}

}  // namespace cpdit::pipeline
