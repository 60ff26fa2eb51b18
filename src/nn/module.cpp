#include <cpdit/core/error.hpp>
#include <cpdit/nn/module.hpp>

#include <algorithm>

namespace cpdit::nn {

namespace {
std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

}  // namespace

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out{{"", this}};
  for (const auto& [name, child] : children_)
    for (auto& [path, m] : child->named_modules()) out.emplace_back(path.empty() ? name : name + "." + path, m);
  return out;
}

std::vector<std::pair<std::string, Parameter*>> Module::named_parameters() {
  std::vector<std::pair<std::string, Parameter*>> out;
  for (auto& [path, module] : named_modules())
    for (auto& [name, p] : module->parameters_) out.emplace_back(join(path, name), &p);
  return out;
}

Module* Module::find(const std::string& path) {
  for (auto& [p, module] : named_modules())
    if (p == path) return module;
  return nullptr;
}

void Module::add_pre_hook(const std::string& tag, PreHook hook) { pre_hooks_.emplace_back(tag, std::move(hook)); }
void Module::add_post_hook(const std::string& tag, PostHook hook) { post_hooks_.emplace_back(tag, std::move(hook)); }

void Module::add_around_hook(const std::string& tag, AroundHook hook) {
  around_hooks_.emplace_back(tag, std::move(hook));
}

void Module::remove_hooks(const std::string& tag) {
  std::erase_if(pre_hooks_, [&](const auto& h) { return h.first == tag; });
  std::erase_if(post_hooks_, [&](const auto& h) { return h.first == tag; });
  std::erase_if(around_hooks_, [&](const auto& h) { return h.first == tag; });
}

Parameter& Module::add_parameter(const std::string& name, Shape shape, bool matrix) {
  auto [it, inserted] = parameters_.emplace(name, Parameter{std::move(shape), matrix, {}});
  CPDIT_CHECK(inserted, internal, "parameter '", name, "' registered twice");
  return it->second;
}

std::vector<Tensor> Module::with_hooks(TensorMap inputs, const Body& body) const {
  for (const auto& [tag, hook] : pre_hooks_) hook(inputs);
  std::vector<Tensor> outputs;
  if (around_hooks_.empty()) {
    outputs = body(inputs);
  } else {
    Body run = body;
    for (const auto& [tag, hook] : around_hooks_)
      run = [&hook, inner = std::move(run)](const TensorMap& in) { return hook(in, inner); };
    outputs = run(inputs);
  }
  for (const auto& [tag, hook] : post_hooks_) hook(outputs);
  return outputs;
}

}  // namespace cpdit::nn
