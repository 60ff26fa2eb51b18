#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/ltx_video/model.hpp>
#include <cpdit/nn/step_cache.hpp>

#include <algorithm>
#include <cmath>
#include <set>

namespace cpdit::models::ltx_video {

parallel::ContextParallelPlan ltx_video_plan() {
  using parallel::ContextParallelInput, parallel::ContextParallelOutput;
  parallel::ModulePlan root;
  root.inputs = {{"hidden_states", ContextParallelInput{1, 3}},
                 {"encoder_hidden_states", ContextParallelInput{1, 3}},
                 {"encoder_attention_mask", ContextParallelInput{1, 2}},
                 // Not in diffusers' plan, which leaves a per-token timestep whole: (B, S) splits with
                 // the tokens; (B,) stays whole.
                 {"timestep", ContextParallelInput{1, 2, false, /*optional=*/true}}};
  parallel::ModulePlan rope;
  rope.outputs = {{0, ContextParallelInput{1, 3, /*split_output=*/true}},   // cos (1, S, D)
                  {1, ContextParallelInput{1, 3, /*split_output=*/true}}};  // sin
  parallel::ModulePlan proj_out;
  proj_out.gathers = {{0, ContextParallelOutput{1, 3}}};
  return {{"", root}, {"rope", rope}, {"proj_out", proj_out}};
}

LTXVideoTransformer3DModel::LTXVideoTransformer3DModel(const LtxVideoConfig& config)
    : config_((config.validate(), config)),
      proj_in_(add_module<nn::Linear>("proj_in", config.in_channels, config.inner_dim())),
      time_embed_(add_module<common::AdaLayerNormSingle>("time_embed", config.inner_dim())),
      caption_projection_(add_module<common::MlpEmbedder>("caption_projection", config.caption_channels,
                                                          config.inner_dim(), common::Activation::gelu_tanh)),
      rope_(add_module<RotaryPosEmbed>("rope", config.inner_dim(), config.patch_size, config.patch_size_t)),
      transformer_blocks_(add_module<nn::ModuleList<TransformerBlock>>("transformer_blocks")),
      norm_out_(add_module<nn::LayerNorm>("norm_out", config.inner_dim(), 1e-6f, /*affine=*/false)),
      proj_out_(add_module<nn::Linear>("proj_out", config.inner_dim(), config.output_channels())),
      scale_shift_table_(add_parameter("scale_shift_table", {2, config.inner_dim()})) {
  for (int64_t i = 0; i < config.num_layers; ++i)
    transformer_blocks_.append(config.inner_dim(), config.num_attention_heads, config.attention_head_dim,
                               config.norm_eps);
}

namespace {
const std::set<std::string> kInputNames{"hidden_states",      "encoder_hidden_states", "encoder_attention_mask",
                                        "timestep",           "num_frames",            "height",
                                        "width",              "rope_interpolation_scale"};

int64_t positive_scalar(const nn::TensorMap& inputs, const std::string& name) {
  const Tensor& t = inputs.at(name);
  CPDIT_CHECK(t.numel() == 1 && t.dtype() == DType::i64, invalid_argument, "LTX-Video ", name,
              " must be one integer, I64 (1,), got ", t.describe());
  const int64_t v = t.contiguous().data<int64_t>()[0];
  CPDIT_CHECK(v >= 1, invalid_argument, "LTX-Video ", name, " must be positive, got ", v);
  return v;
}

// The text mask as the attention's key mask. diffusers adds −10000 to the logits of padded keys;
// after the softmax that is exactly hiding them in float32, except where a batch item has no real
// text token: then every logit moves alike and all the text is attended, so such a row keeps all.
Tensor text_keep(const Tensor& mask) {
  Tensor keep = mask.to(DType::boolean).contiguous().clone();
  bool* k = keep.data<bool>();
  const int64_t rows = keep.size(0), length = keep.size(1);
  for (int64_t b = 0; b < rows; ++b)
    if (std::none_of(k + b * length, k + (b + 1) * length, [](bool v) { return v; }))
      std::fill(k + b * length, k + (b + 1) * length, true);
  return keep;
}
}  // namespace

nn::TensorMap LTXVideoTransformer3DModel::forward(const nn::TensorMap& inputs) const {
  for (const auto& [name, t] : inputs)
    CPDIT_CHECK(kInputNames.count(name), invalid_argument, "LTX-Video forward takes no input '", name,
                "' (it takes hidden_states, encoder_hidden_states, encoder_attention_mask, timestep, num_frames, "
                "height, width, rope_interpolation_scale)");
  for (const char* name : {"hidden_states", "encoder_hidden_states", "timestep", "num_frames", "height", "width"})
    CPDIT_CHECK(inputs.count(name) && inputs.at(name).defined(), invalid_argument, "LTX-Video forward needs the input '",
                name, "'");
  auto optional_input = [&](const char* name) { return inputs.count(name) ? inputs.at(name) : Tensor(); };

  // Every shape is checked here, on the whole inputs, before the plan splits them.
  const Tensor& latent = inputs.at("hidden_states");
  const std::array<int64_t, 3> grid{positive_scalar(inputs, "num_frames"), positive_scalar(inputs, "height"),
                                    positive_scalar(inputs, "width")};
  CPDIT_CHECK(latent.dim() == 3 && latent.size(2) == config_.in_channels && latent.size(0) > 0, invalid_argument,
              "LTX-Video hidden_states must be (B, S, ", config_.in_channels, "), got ", latent.describe());
  const int64_t batch = latent.size(0), tokens = latent.size(1);
  // Divisions, not a product: huge sizes must not overflow into a match.
  CPDIT_CHECK(tokens % grid[0] == 0 && (tokens / grid[0]) % grid[1] == 0 && tokens / grid[0] / grid[1] == grid[2],
              invalid_argument, "LTX-Video num_frames x height x width = ", grid[0], " x ", grid[1], " x ", grid[2],
              " latent tokens, but hidden_states has ", tokens);
  const Tensor& text = inputs.at("encoder_hidden_states");
  CPDIT_CHECK(text.dim() == 3 && text.size(0) == batch && text.size(1) > 0 && text.size(2) == config_.caption_channels,
              invalid_argument,
              "LTX-Video encoder_hidden_states must be (", batch, ", L, ", config_.caption_channels, "), got ",
              text.describe());
  Tensor mask = optional_input("encoder_attention_mask");
  if (mask.defined()) {
    CPDIT_CHECK(mask.dim() == 2 && mask.size(0) == batch && mask.size(1) == text.size(1), invalid_argument,
                "LTX-Video encoder_attention_mask must be (", batch, ", ", text.size(1), "), got ", mask.describe());
    mask = text_keep(mask);
  }
  // (B,) and (B, 1) are one timestep per batch item, (B, S) one per token.
  Tensor timestep = inputs.at("timestep");
  CPDIT_CHECK(timestep.dtype() != DType::boolean &&
                  (timestep.shape() == Shape{batch} || timestep.shape() == Shape{batch, 1} ||
                   timestep.shape() == Shape{batch, tokens}),
              invalid_argument, "LTX-Video timestep must be (", batch, ",), (", batch, ", 1) or per token (", batch,
              ", ", tokens, "), got ", timestep.describe());
  {
    const Tensor values = timestep.to(DType::f32).contiguous();
    const float* v = values.data<float>();
    CPDIT_CHECK(std::all_of(v, v + values.numel(), [](float x) { return std::isfinite(x); }), invalid_argument,
                "LTX-Video timestep holds a NaN or infinite value");
  }
  if (timestep.dim() == 2 && timestep.size(1) == 1) timestep = timestep.reshape({batch});
  std::optional<std::array<double, 3>> scale;
  if (const Tensor s = optional_input("rope_interpolation_scale"); s.defined()) {
    CPDIT_CHECK(s.numel() == 3 && s.dtype() == DType::f32, invalid_argument,
                "LTX-Video rope_interpolation_scale must be 3 floats (F64 (3,)), got ", s.describe());
    const Tensor v = s.contiguous();
    scale = std::array<double, 3>{v.data<float>()[0], v.data<float>()[1], v.data<float>()[2]};
  }

  nn::TensorMap args{{"hidden_states", latent}, {"encoder_hidden_states", text},
                     {"encoder_attention_mask", mask}, {"timestep", timestep}};
  ForwardScope scope(*this);
  return {{"sample", with_hooks(std::move(args), [&](const nn::TensorMap& in) {
    const int64_t dim = config_.inner_dim();
    auto rope = rope_.forward(grid, scale);
    Tensor x = proj_in_.forward(in.at("hidden_states").to(DType::f32));
    const Tensor& t = in.at("timestep");
    // One embedding per batch item, or per token of this rank's share.
    auto time = time_embed_.forward(t.to(DType::f32).reshape({-1}));
    const bool per_token = t.dim() == 2;
    const int64_t rows = per_token ? t.size(1) : 1;
    const Tensor temb = per_token ? time[0].reshape({batch, rows, 6, dim}) : time[0].reshape({batch, 6, dim});
    const Tensor embedded = per_token ? time[1].reshape({batch, rows, 1, dim}) : time[1].reshape({batch, 1, dim});
    const Tensor c = caption_projection_.forward(in.at("encoder_hidden_states").to(DType::f32));
    x = nn::run_blocks(transformer_blocks_.size(), {x}, [&](size_t i, const std::vector<Tensor>& s) {
      return std::vector<Tensor>{transformer_blocks_[i].forward(s[0], c, temb, rope[0], rope[1],
                                                                 in.at("encoder_attention_mask"))};
    })[0];
    // The output head: the table plus the embedded timestep, shift then scale.
    auto head = common::scale_shift_modulation(scale_shift_table_.value, embedded);
    x = kernels::modulate(norm_out_.forward(x), head[1], head[0]);
    return std::vector<Tensor>{proj_out_.forward(x)};
  })[0]}};
}

}  // namespace cpdit::models::ltx_video
