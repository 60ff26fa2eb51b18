#include <cpdit/core/error.hpp>
#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/wan/model.hpp>

#include <set>

namespace cpdit::models::wan {

parallel::ContextParallelPlan wan_plan() {
  parallel::ContextParallelPlan plan = common::wan::token_split_plan();
  parallel::ModulePlan root;  // a per-token timestep (B, S), when given, splits with the tokens
  root.inputs = {{"timestep", parallel::ContextParallelInput{1, 2, false, /*optional=*/true}}};
  plan[""] = root;
  return plan;
}

WanTransformer3DModel::WanTransformer3DModel(const WanConfig& config)
    : Wan21Network(config, common::wan::SinusoidPrecision::f32), config_(config) {}

namespace {
const std::set<std::string> kInputNames{"hidden_states", "timestep", "encoder_hidden_states"};
const char* const kImageInput = "encoder_hidden_states_image";  // I2V / FLF2V models only
}  // namespace

nn::TensorMap WanTransformer3DModel::forward(const nn::TensorMap& inputs) const {
  for (const auto& [name, t] : inputs)
    CPDIT_CHECK(kInputNames.count(name) || name == kImageInput, invalid_argument, "Wan forward takes no input '", name,
                "' (it takes hidden_states, timestep, encoder_hidden_states, encoder_hidden_states_image)");
  nn::TensorMap args;
  for (const auto& name : kInputNames) {
    auto it = inputs.find(name);
    CPDIT_CHECK(it != inputs.end() && it->second.defined(), invalid_argument, "Wan forward needs the input '", name,
                "'");
    args[name] = it->second;
  }
  if (inputs.count(kImageInput)) args[kImageInput] = inputs.at(kImageInput);

  ForwardScope scope(*this);
  return {{"sample", with_hooks(std::move(args), [&](const nn::TensorMap& in) {
    const Tensor latent = in.at("hidden_states").to(DType::f32);
    const Tensor& text = in.at("encoder_hidden_states");
    const std::array<int64_t, 3> grid = common::wan::checked_patch_grid(latent, text, config_.in_channels,
                                                                        config_.patch_size, config_.text_dim, "Wan");
    const int64_t batch = latent.size(0);
    CPDIT_CHECK(in.at("timestep").size(0) == batch, invalid_argument, "Wan timestep must have batch ", batch, ", got ",
                in.at("timestep").describe());

    auto rope = rope_.forward(latent);
    Tensor x = patch_embedding_.forward(latent);
    auto cond = condition_embedder_.forward(in.at("timestep"), text.to(DType::f32), image_tokens(in));
    const Tensor& temb = cond[0];  // (B, D) | (B, S, D)
    const int64_t dim = config_.inner_dim();
    // (B, 6, D), or (B, S, 6, D) for per-token timesteps
    Tensor tproj = temb.dim() == 2 ? cond[1].reshape({batch, 6, dim}) : cond[1].reshape({batch, temb.size(1), 6, dim});
    return std::vector<Tensor>{blocks_and_head(x, cond, tproj, temb, rope, {}, grid)};
  })[0]}};
}

}  // namespace cpdit::models::wan
