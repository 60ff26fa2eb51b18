#pragma once
// Stops a denoising loop at the first step whose transformer output holds NaN or Inf (weights with
// NaN, an overflow), naming the step, instead of finishing with a NaN image and exit code 0. The
// check reads the model's outputs once per call, which is cheap next to the forward. With
// `every_module` (--check-finite) every module's outputs are checked as they are made, and the error
// names the first module whose output was not finite (modules finish inner first, so it is the one
// that made them).
#include <cpdit/nn/module.hpp>
#include <cpdit/pipeline/finite_check.hpp>

#include <string>
#include <utility>
#include <vector>

namespace cpdit::pipeline {

class FiniteWatch {
 public:
  // `stage` names the loop in the message ("denoise"). The hooks stay until the watch is destroyed.
  // Several models (Wan 2.2's two experts; null ones skipped) share the step count.
  FiniteWatch(std::vector<nn::Module*> models, std::string stage, bool every_module);
  FiniteWatch(nn::Module& model, std::string stage, bool every_module)
      : FiniteWatch(std::vector<nn::Module*>{&model}, std::move(stage), every_module) {}
  ~FiniteWatch();
  FiniteWatch(const FiniteWatch&) = delete;
  FiniteWatch& operator=(const FiniteWatch&) = delete;

  // The loop finished a step: later errors name the next one.
  void step_done() { ++step_; }

 private:
  void check(const std::string& module, const std::vector<Tensor>& outputs) const;

  std::vector<nn::Module*> models_;
  std::string stage_;
  bool every_module_;
  int step_ = 1;
};

}  // namespace cpdit::pipeline
