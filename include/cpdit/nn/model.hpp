#pragma once
// Model: the root of a module tree, with what diffusers puts on a model object: its attention
// backend and its context parallelism. Model code stays single-device:
// enable_parallelism installs the model's plan as split/gather hooks and binds the parallel context
// that attention::dispatch consults during this model's forward.
#include <cpdit/attention/attention.hpp>
#include <cpdit/comm/communicator.hpp>
#include <cpdit/nn/module.hpp>
#include <cpdit/parallel/config.hpp>
#include <cpdit/parallel/context.hpp>
#include <cpdit/parallel/plan.hpp>

#include <memory>
#include <optional>
#include <string>

namespace cpdit::nn {

class Model : public Module {
 public:
  // One call of the model on its arguments by the Python library's names, returning its outputs by
  // the names the library gives them: `sample` for a denoising transformer or a VAE decode,
  // `last_hidden_state` and `pooler_output` for a text encoder. Callers that only know a model as
  // an nn::Model (the registry, the command line) run it through this.
  virtual TensorMap forward(const TensorMap& inputs) const = 0;

  // The plan declared beside the model.
  virtual parallel::ContextParallelPlan context_parallel_plan() const = 0;
  // Which tokens each rank holds under the plan (parallel/layout.hpp): contiguous unless a model's
  // attention rule makes another layout balance the ranks' work (a causal mask: zigzag).
  virtual parallel::TokenLayout token_layout() const { return parallel::TokenLayout::contiguous; }

  // The backend this model's attention runs on (default: the process-wide one). Refused, with the
  // model unchanged, when parallelism is enabled and the backend cannot serve its mode.
  void set_attention_backend(const std::string& name);

  // Collective over `group` (every rank calls it). Checks the degrees against the group size and
  // the attention backend against the mode, then installs `plan` (default: the model's own), which
  // splits the tokens in the model's token_layout() (config.token_layout is set to it).
  void enable_parallelism(std::shared_ptr<comm::Communicator> group, const parallel::ContextParallelConfig& config,
                          std::optional<parallel::ContextParallelPlan> plan = std::nullopt);
  void disable_parallelism();
  bool parallel_enabled() const { return context_ != nullptr; }

 protected:
  // Binds this model's backend and parallel context on the calling thread while it lives; a model's
  // forward opens one first.
  class ForwardScope {
   public:
    explicit ForwardScope(const Model& model);

   private:
    std::optional<attention::ScopedBackend> backend_;
    std::optional<attention::ScopedRouter> router_;
    std::optional<parallel::ScopedContext> context_;
  };

 private:
  const attention::Backend& backend() const;

  std::optional<std::string> backend_name_;
  std::optional<parallel::ContextParallelConfig> config_;
  std::shared_ptr<parallel::ParallelContext> context_;
};

}  // namespace cpdit::nn
