#include "pipeline/finite_watch.hpp"

#include <cpdit/core/error.hpp>

#include <cmath>

namespace cpdit::pipeline {

namespace {
const char* const kTag = "finite_watch";
}

bool all_finite(const Tensor& t) {
  if (!t.defined() || t.dtype() == DType::i64 || t.dtype() == DType::boolean) return true;
  const Tensor values = t.to(DType::f32);
  const float* data = values.data<float>();
  // Summing with a NaN or Inf keeps it; one pass without a branch per element.
  float sum = 0;
  for (int64_t i = 0; i < values.numel(); ++i) sum += data[i] * 0.0f;
  return sum == 0.0f;
}

FiniteWatch::FiniteWatch(std::vector<nn::Module*> models, std::string stage, bool every_module)
    : stage_(std::move(stage)), every_module_(every_module) {
  for (nn::Module* model : models) {
    if (model == nullptr) continue;
    models_.push_back(model);
    if (!every_module_) {
      model->add_post_hook(kTag, [this](std::vector<Tensor>& outputs) { check("", outputs); });
      continue;
    }
    for (auto& [path, module] : model->named_modules())
      module->add_post_hook(kTag, [this, name = path](std::vector<Tensor>& outputs) { check(name, outputs); });
  }
}

FiniteWatch::~FiniteWatch() {
  for (nn::Module* model : models_)
    for (auto& [path, module] : model->named_modules()) module->remove_hooks(kTag);
}

void FiniteWatch::check(const std::string& module, const std::vector<Tensor>& outputs) const {
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (all_finite(outputs[i])) continue;
    if (!every_module_)
      fail(ErrorKind::invalid_argument, stage_, " step ", step_,
           ": the transformer's output holds NaN or Inf (are the weights finite? --check-finite names the module "
           "that made it)");
    fail(ErrorKind::invalid_argument, stage_, " step ", step_, ": ",
         module.empty() ? std::string("the model") : "module " + module,
         " was the first to output NaN or Inf (its output ", i, ")");
  }
}

}  // namespace cpdit::pipeline
