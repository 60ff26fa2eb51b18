#include <cpdit/core/error.hpp>
#include <cpdit/nn/model.hpp>
#include <cpdit/nn/plan_hooks.hpp>
#include <cpdit/parallel/context.hpp>

namespace cpdit::nn {

namespace {
void check_backend_serves(const attention::Backend& backend, const parallel::ContextParallelConfig& config) {
  attention::Requirements needs;
  needs.mode = config.mode();
  needs.lse = needs.mode == attention::Requirements::Mode::ring || needs.mode == attention::Requirements::Mode::unified;
  attention::check_supports(backend, needs);
}
}  // namespace

const attention::Backend& Model::backend() const {
  return backend_name_ ? attention::backend(*backend_name_) : attention::current_backend();
}

void Model::set_attention_backend(const std::string& name) {
  const attention::Backend& b = attention::backend(name);  // unknown names are refused here
  if (config_) check_backend_serves(b, *config_);
  backend_name_ = name;
}

void Model::enable_parallelism(std::shared_ptr<comm::Communicator> group, const parallel::ContextParallelConfig& config,
                               std::optional<parallel::ContextParallelPlan> plan) {
  CPDIT_CHECK(group != nullptr, invalid_argument, "enable_parallelism needs a communicator");
  parallel::validate_degrees(config, group->size());
  check_backend_serves(backend(), config);
  parallel::ContextParallelConfig laid_out = config;
  laid_out.token_layout = token_layout();
  auto context = std::make_shared<parallel::ParallelContext>(group, laid_out);
  // Tokens are split in the layout the context's attention reads their positions from.
  TokenExchange exchange{
      [context](const Tensor& t, int dim) { return context->shard(t, dim); },
      [context](const Tensor& t, int dim) { return context->gather(t, dim); },
  };
  install_plan(*this, plan ? *plan : context_parallel_plan(), exchange);
  context_ = std::move(context);
  config_ = laid_out;
}

void Model::disable_parallelism() {
  remove_plan(*this);
  context_.reset();
  config_.reset();
}

Model::ForwardScope::ForwardScope(const Model& model) {
  if (model.backend_name_) backend_.emplace(*model.backend_name_);
  if (model.context_) {
    router_.emplace(model.context_.get());
    context_.emplace(model.context_.get());
  }
}

}  // namespace cpdit::nn
