#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/flux/model.hpp>
#include <cpdit/nn/step_cache.hpp>

#include <set>

namespace cpdit::models::flux {

parallel::ContextParallelPlan flux_plan() {
  using parallel::ContextParallelInput, parallel::ContextParallelOutput;
  parallel::ModulePlan root;
  root.inputs = {{"hidden_states", ContextParallelInput{1, 3}},
                 {"encoder_hidden_states", ContextParallelInput{1, 3}},
                 {"img_ids", ContextParallelInput{0, 2}},
                 {"txt_ids", ContextParallelInput{0, 2}}};
  parallel::ModulePlan proj_out;
  proj_out.gathers = {{0, ContextParallelOutput{1, 3}}};
  return {{"", root}, {"proj_out", proj_out}};
}

namespace {
const FluxConfig& validated(const FluxConfig& config) {
  config.validate();
  return config;
}
}  // namespace

FluxTransformer2DModel::FluxTransformer2DModel(const FluxConfig& config)
    : config_(validated(config)),
      x_embedder_(add_module<nn::Linear>("x_embedder", config.in_channels, config.inner_dim())),
      time_text_embed_(add_module<TimeTextEmbed>("time_text_embed", config.inner_dim(), config.pooled_projection_dim,
                                                 config.guidance_embeds)),
      context_embedder_(add_module<nn::Linear>("context_embedder", config.joint_attention_dim, config.inner_dim())),
      pos_embed_(add_module<PosEmbed>("pos_embed", config.axes_dims_rope)),
      transformer_blocks_(add_module<nn::ModuleList<DoubleBlock>>("transformer_blocks")),
      single_transformer_blocks_(add_module<nn::ModuleList<SingleBlock>>("single_transformer_blocks")),
      norm_out_(add_module<common::AdaLayerNormContinuous>("norm_out", config.inner_dim(), config.inner_dim(), 1e-6f)),
      proj_out_(add_module<nn::Linear>("proj_out", config.inner_dim(),
                                       config.patch_size * config.patch_size * config.output_channels())) {
  for (int64_t i = 0; i < config.num_layers; ++i)
    transformer_blocks_.append(config.inner_dim(), config.num_attention_heads, config.attention_head_dim);
  for (int64_t i = 0; i < config.num_single_layers; ++i)
    single_transformer_blocks_.append(config.inner_dim(), config.num_attention_heads, config.attention_head_dim);
}

namespace {
const std::set<std::string> kInputNames{"hidden_states", "encoder_hidden_states", "pooled_projections", "timestep",
                                        "img_ids",       "txt_ids",               "guidance"};

// The deprecated (1, N, 3) form of ids loses its batch dim, as diffusers does. (Under context
// parallelism the plan refuses it before this point: a 3-dim id tensor would not be split.)
Tensor ids_2d(const Tensor& ids) { return ids.dim() == 3 && ids.size(0) == 1 ? ids.select(0, 0) : ids; }

void check_shape(const Tensor& t, const char* name, const Shape& expected) {
  bool ok = t.dim() == int(expected.size());
  for (size_t i = 0; ok && i < expected.size(); ++i) ok = expected[i] < 0 || t.size(int(i)) == expected[i];
  if (ok) return;
  std::string want = "(";
  for (size_t i = 0; i < expected.size(); ++i) want += (i ? ", " : "") + (expected[i] < 0 ? std::string("*") : std::to_string(expected[i]));
  fail(ErrorKind::invalid_argument, "FLUX input '", name, "' must be ", want, "), got ", t.describe());
}
}  // namespace

nn::TensorMap FluxTransformer2DModel::forward(const nn::TensorMap& inputs) const {
  for (const auto& [name, t] : inputs)
    CPDIT_CHECK(kInputNames.count(name), invalid_argument, "FLUX forward takes no input '", name, "'");
  nn::TensorMap args;
  for (const auto& name : kInputNames) {
    auto it = inputs.find(name);
    args[name] = it == inputs.end() ? Tensor() : it->second;
  }
  for (const char* name : {"hidden_states", "encoder_hidden_states", "pooled_projections", "timestep", "img_ids", "txt_ids"})
    CPDIT_CHECK(args[name].defined(), invalid_argument, "FLUX forward needs the input '", name, "'");
  CPDIT_CHECK(!config_.guidance_embeds || args["guidance"].defined(), invalid_argument,
              "this FLUX model has a guidance embedder: pass the input 'guidance' (e.g. 3.5)");

  ForwardScope scope(*this);
  return {{"sample", with_hooks(std::move(args), [&](const nn::TensorMap& in) {
    const int64_t batch = in.at("hidden_states").size(0);
    check_shape(in.at("hidden_states"), "hidden_states", {-1, -1, config_.in_channels});
    check_shape(in.at("encoder_hidden_states"), "encoder_hidden_states", {batch, -1, config_.joint_attention_dim});
    check_shape(in.at("pooled_projections"), "pooled_projections", {batch, config_.pooled_projection_dim});
    Tensor img_ids = ids_2d(in.at("img_ids")), txt_ids = ids_2d(in.at("txt_ids"));
    check_shape(img_ids, "img_ids", {in.at("hidden_states").size(1), 3});
    check_shape(txt_ids, "txt_ids", {in.at("encoder_hidden_states").size(1), 3});

    // The timestep (and guidance) are cast to the model dtype, then multiplied by 1000.
    auto times_1000 = [&](const Tensor& t, const char* name) {
      if (!t.defined()) return t;
      Tensor v = t.to(DType::f32).reshape({-1});
      check_shape(v, name, {batch});
      return kernels::mul(v, Tensor::full({1}, 1000.0));
    };
    Tensor temb = time_text_embed_.forward(times_1000(in.at("timestep"), "timestep"),
                                           times_1000(in.at("guidance"), "guidance"), in.at("pooled_projections"));
    Tensor x = x_embedder_.forward(in.at("hidden_states").to(DType::f32));
    Tensor c = context_embedder_.forward(in.at("encoder_hidden_states").to(DType::f32));
    auto rope = pos_embed_.forward(cat({txt_ids.to(DType::f32), img_ids.to(DType::f32)}, 0));  // text first
    // The double blocks, then the single ones, as one run over the streams {image, text} (a step
    // cache's head block is the first double block, its tail the last single one).
    const size_t doubles = transformer_blocks_.size();
    auto block = [&](size_t i, const std::vector<Tensor>& s) {
      auto out = i < doubles ? transformer_blocks_[i].forward(s[0], s[1], temb, rope[0], rope[1])
                             : single_transformer_blocks_[i - doubles].forward(s[0], s[1], temb, rope[0], rope[1]);
      return std::vector<Tensor>{out[1], out[0]};
    };
    x = nn::run_blocks(doubles + single_transformer_blocks_.size(), {x, c}, block)[0];
    x = norm_out_.forward(x, temb);
    return std::vector<Tensor>{proj_out_.forward(x)};
  })[0]}};
}

}  // namespace cpdit::models::flux
