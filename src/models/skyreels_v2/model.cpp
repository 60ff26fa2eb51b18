#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/skyreels_v2/model.hpp>
#include <cpdit/nn/config_inference.hpp>
#include <cpdit/nn/load.hpp>

#include <cstring>
#include <set>

namespace cpdit::models::skyreels_v2 {

using common::wan::unpatchify;

SkyReelsV2Config SkyReelsV2Config::from_json(const nlohmann::json& j, SkyReelsV2Config c) {
  static_cast<common::wan::WanConfig&>(c) = WanConfig::from_json(j, c);
  nn::read_config_fields(
      j, "SkyReels-V2", {{"inject_sample_info", c.inject_sample_info}, {"num_frame_per_block", c.num_frame_per_block}});
  return c;
}

SkyReelsV2Config SkyReelsV2Config::infer(const nn::StateDict& state) {
  SkyReelsV2Config c;
  static_cast<common::wan::WanConfig&>(c) = WanConfig::infer(state);
  c.inject_sample_info = state.count("fps_embedding.weight") > 0;
  return c;
}

void SkyReelsV2Config::validate() const {
  WanConfig::validate();
  nn::require_positive("SkyReels-V2", {{"num_frame_per_block", num_frame_per_block}});
}

parallel::ContextParallelPlan skyreels_v2_plan() {
  using parallel::ContextParallelInput;
  parallel::ContextParallelPlan plan = common::wan::token_split_plan();
  parallel::ModulePlan frame_to_tokens;
  frame_to_tokens.outputs = {{0, ContextParallelInput{1, 3, /*split_output=*/true}},   // temb (B, S, D)
                             {1, ContextParallelInput{1, 4, /*split_output=*/true}}};  // timestep_proj (B, S, 6, D)
  plan["frame_to_tokens"] = frame_to_tokens;
  return plan;
}

parallel::TokenLayout SkyReelsV2Transformer3DModel::token_layout() const {
  return config_.num_frame_per_block > 1 ? parallel::TokenLayout::zigzag : parallel::TokenLayout::contiguous;
}

namespace {

// (B, F, W) -> (B, F·T, W): row (b, f) repeated for the T tokens of frame f.
Tensor repeat_per_token(const Tensor& rows, int64_t tokens_per_frame) {
  const Tensor x = rows.contiguous();
  const int64_t batch = x.size(0), frames = x.size(1), width = x.size(2);
  Tensor out = Tensor::empty({batch, frames * tokens_per_frame, width});
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  for (int64_t row = 0; row < batch * frames; ++row)
    for (int64_t t = 0; t < tokens_per_frame; ++t)
      std::memcpy(dst + (row * tokens_per_frame + t) * width, src + row * width, sizeof(float) * size_t(width));
  return out;
}

const std::set<std::string> kRequired{"hidden_states", "timestep", "encoder_hidden_states"};
const std::set<std::string> kOptional{"enable_diffusion_forcing", "fps", "encoder_hidden_states_image"};

}  // namespace

std::vector<Tensor> FrameToTokens::forward(const Tensor& temb, const Tensor& timestep_proj,
                                           int64_t tokens_per_frame) const {
  return with_hooks({{"temb", temb}, {"timestep_proj", timestep_proj}}, [&](const nn::TensorMap& in) {
    const Tensor tokens_temb = repeat_per_token(in.at("temb"), tokens_per_frame);
    const Tensor tokens_proj = repeat_per_token(in.at("timestep_proj"), tokens_per_frame);
    return std::vector<Tensor>{tokens_temb,
                               tokens_proj.reshape({tokens_temb.size(0), tokens_temb.size(1), 6, tokens_temb.size(2)})};
  });
}

SkyReelsV2Transformer3DModel::SkyReelsV2Transformer3DModel(const SkyReelsV2Config& config)
    : Wan21Network(config, common::wan::SinusoidPrecision::f64),  // SkyReels-V2's sinusoid is float64
      config_((config.validate(), config)),
      frame_to_tokens_(add_module<FrameToTokens>("frame_to_tokens")) {
  if (config.inject_sample_info) {
    const int64_t dim = config.inner_dim();
    fps_embedding_ = &add_module<nn::Embedding>("fps_embedding", 2, dim);
    auto& projection = add_module<nn::Container>("fps_projection");
    auto& net = projection.add_module<nn::Container>("net");
    fps_hidden_ = &net.add_module<nn::Container>("0").add_module<nn::Linear>("proj", dim, dim);
    fps_out_ = &net.add_module<nn::Linear>("2", dim, 6 * dim);
  }
}

Tensor SkyReelsV2Transformer3DModel::add_fps(const Tensor& timestep_proj, const Tensor& fps, int64_t batch) const {
  CPDIT_CHECK(fps.defined(), invalid_argument, "SkyReels-V2 forward needs the input 'fps' (inject_sample_info is on)");
  const Tensor ids = fps.reshape({-1});
  CPDIT_CHECK(ids.dtype() == DType::i64 && (ids.size(0) == 1 || ids.size(0) == batch), invalid_argument,
              "SkyReels-V2 fps must be I64 (1,) or (", batch, ",), got ", fps.describe());
  const Tensor projected = fps_out_->forward(kernels::silu(fps_hidden_->forward(fps_embedding_->forward(ids))));
  Tensor out = timestep_proj.contiguous().clone();
  const Tensor p = projected.contiguous();
  for (int64_t b = 0; b < batch; ++b) {
    Tensor item_frames = out.narrow(0, b, 1);  // (1, F, 6D), a view of out
    kernels::add_(item_frames, p.narrow(0, ids.size(0) == 1 ? 0 : b, 1).reshape({1, 1, p.size(1)}));
  }
  return out;
}

nn::TensorMap SkyReelsV2Transformer3DModel::forward(const nn::TensorMap& inputs) const {
  for (const auto& [name, t] : inputs)
    CPDIT_CHECK(kRequired.count(name) || kOptional.count(name), invalid_argument,
                "SkyReels-V2 forward takes no input '", name,
                "' (it takes hidden_states, timestep, encoder_hidden_states, enable_diffusion_forcing, fps, "
                "encoder_hidden_states_image)");
  nn::TensorMap args;
  for (const auto& name : kRequired) {
    auto it = inputs.find(name);
    CPDIT_CHECK(it != inputs.end() && it->second.defined(), invalid_argument, "SkyReels-V2 forward needs the input '",
                name, "'");
    args[name] = it->second;
  }
  for (const auto& name : kOptional)
    if (inputs.count(name)) args[name] = inputs.at(name);

  ForwardScope scope(*this);
  return {{"sample", with_hooks(std::move(args), [&](const nn::TensorMap& in) {
    const Tensor latent = in.at("hidden_states").to(DType::f32);
    const Tensor& text = in.at("encoder_hidden_states");
    const std::array<int64_t, 3> grid = common::wan::checked_patch_grid(
        latent, text, config_.in_channels, config_.patch_size, config_.text_dim, "SkyReels-V2");
    const int64_t batch = latent.size(0), frames = grid[0], tokens_per_frame = grid[1] * grid[2];
    CPDIT_CHECK(frames % config_.num_frame_per_block == 0, invalid_argument, "SkyReels-V2: ", frames,
                " latent frames do not split into blocks of num_frame_per_block = ", config_.num_frame_per_block);
    const bool forcing = in.count("enable_diffusion_forcing") &&
                         in.at("enable_diffusion_forcing").numel() == 1 &&
                         in.at("enable_diffusion_forcing").to(DType::f32).data<float>()[0] != 0.0f;
    CPDIT_CHECK(!in.count("enable_diffusion_forcing") || in.at("enable_diffusion_forcing").numel() == 1,
                invalid_argument, "SkyReels-V2 enable_diffusion_forcing must be one value, got ",
                in.at("enable_diffusion_forcing").describe());
    // One timestep per latent frame: (B, F') under diffusion forcing; (B,) is the same one for every frame.
    Tensor timestep = in.at("timestep").to(DType::f32);
    if (forcing) {
      CPDIT_CHECK(timestep.dim() == 2 && timestep.size(0) == batch && timestep.size(1) == frames, invalid_argument,
                  "SkyReels-V2 timestep under diffusion forcing must be (", batch, ", ", frames, "), got ",
                  timestep.describe());
    } else {
      CPDIT_CHECK(timestep.dim() == 1 && timestep.size(0) == batch, invalid_argument, "SkyReels-V2 timestep must be (",
                  batch, ",) without diffusion forcing, got ", timestep.describe());
      timestep = kernels::add(Tensor::zeros({batch, frames}), timestep.reshape({batch, 1}));
    }

    auto rope = rope_.forward(latent);
    Tensor x = patch_embedding_.forward(latent);
    auto cond = condition_embedder_.forward(timestep, text.to(DType::f32), image_tokens(in));  // temb (B, F, D), ...
    Tensor timestep_proj = cond[1];  // (B, F, 6D)
    if (config_.inject_sample_info)
      timestep_proj = add_fps(timestep_proj, in.count("fps") ? in.at("fps") : Tensor(), batch);
    auto per_token = frame_to_tokens_.forward(cond[0], timestep_proj, tokens_per_frame);

    // diffusers builds no mask for blocks of one frame: every token then sees every frame.
    const attention::Mask mask = config_.num_frame_per_block > 1
                                     ? attention::Mask::block_causal(config_.num_frame_per_block * tokens_per_frame)
                                     : attention::Mask::none();
    return std::vector<Tensor>{blocks_and_head(x, cond, per_token[1], per_token[0], rope, mask, grid)};
  })[0]}};
}

SkyReelsV2Checkpoint read_skyreels_v2_checkpoint(const std::string& path,
                                                 const std::optional<std::string>& config_path) {
  return nn::read_transformer_checkpoint<SkyReelsV2Checkpoint>(path, config_path);
}

std::unique_ptr<SkyReelsV2Transformer3DModel> load_skyreels_v2(const SkyReelsV2Checkpoint& checkpoint,
                                                               const nn::LoadOptions& options) {
  return nn::load_model<SkyReelsV2Transformer3DModel>(checkpoint, options);
}

}  // namespace cpdit::models::skyreels_v2
