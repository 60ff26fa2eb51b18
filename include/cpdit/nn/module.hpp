#pragma once
// Module: a node of a model's tree. Children have names, so every module and parameter has a dotted
// path from the root ("transformer_blocks.3.attn.to_q.weight"); parameters declare the shape a
// checkpoint must supply. A module does not know its own path: paths come from walking the tree.
//
// Forward hooks: each module's forward is an ordinary C++ function with its own signature, and runs
// its body through with_hooks(), which shows the hooks the tensor arguments by parameter name and the
// results by index. The plan machinery (nn/parallelism.hpp) splits and gathers through these hooks;
// tests record intermediates through them. An around hook stands in for the body itself, as diffusers'
// ModelHook.new_forward: it may run the body or return outputs of its own (TaylorSeer's predictions,
// nn/step_cache.hpp).
#include <cpdit/core/tensor.hpp>
#include <cpdit/core/weight.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace cpdit::nn {

// Tensor arguments of one forward call, by the forward's parameter names. An argument the caller
// did not pass is an undefined Tensor.
using TensorMap = std::map<std::string, Tensor>;

struct Parameter {
  Shape shape;          // what the checkpoint must supply
  bool matrix = false;  // a Linear weight: narrowed to bf16 by LoadOptions::dtype = bf16
  Weight value;         // undefined until loaded
};

class Module {
 public:
  using PreHook = std::function<void(TensorMap& inputs)>;
  using PostHook = std::function<void(std::vector<Tensor>& outputs)>;
  using Body = std::function<std::vector<Tensor>(const TensorMap& inputs)>;
  using AroundHook = std::function<std::vector<Tensor>(const TensorMap& inputs, const Body& body)>;

  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Depth-first, parents before children; the root's path is "".
  std::vector<std::pair<std::string, Module*>> named_modules();
  std::vector<std::pair<std::string, Parameter*>> named_parameters();
  Module* find(const std::string& path);  // nullptr when no module has that path

  // Hooks carry a tag so that one owner (e.g. "context_parallel") can remove its own.
  void add_pre_hook(const std::string& tag, PreHook hook);
  void add_post_hook(const std::string& tag, PostHook hook);
  // Runs after the pre-hooks and before the post-hooks; a later one wraps an earlier one.
  void add_around_hook(const std::string& tag, AroundHook hook);
  void remove_hooks(const std::string& tag);
  // Whether any hook is installed: a caller that fuses this module's work into its own pass (and so
  // never calls its forward) does so only when no hook expects to see it run.
  bool has_hooks() const { return !pre_hooks_.empty() || !post_hooks_.empty() || !around_hooks_.empty(); }

 protected:
  template <class M, class... Args>
  M& add_module(const std::string& name, Args&&... args) {
    auto child = std::make_unique<M>(std::forward<Args>(args)...);
    M& ref = *child;
    children_.emplace_back(name, std::move(child));
    return ref;
  }
  Parameter& add_parameter(const std::string& name, Shape shape, bool matrix = false);

  // Runs pre-hooks on `inputs`, then body(inputs) through the around hooks, then post-hooks on its results.
  std::vector<Tensor> with_hooks(TensorMap inputs, const Body& body) const;

 private:
  std::vector<std::pair<std::string, std::unique_ptr<Module>>> children_;
  std::map<std::string, Parameter> parameters_;  // map: references stay valid
  std::vector<std::pair<std::string, PreHook>> pre_hooks_;
  std::vector<std::pair<std::string, PostHook>> post_hooks_;
  std::vector<std::pair<std::string, AroundHook>> around_hooks_;
};

// A module that only groups children under a name (diffusers' "ff.net", "attn.to_out").
class Container : public Module {
 public:
  using Module::add_module;
};

// A numbered list of children ("transformer_blocks.0", ".1", ...).
template <class M>
class ModuleList : public Module {
 public:
  template <class... Args>
  M& append(Args&&... args) {
    M& m = add_module<M>(std::to_string(items_.size()), std::forward<Args>(args)...);
    items_.push_back(&m);
    return m;
  }
  M& operator[](size_t i) const { return *items_.at(i); }
  size_t size() const { return items_.size(); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<M*> items_;
};

}  // namespace cpdit::nn
