#include <cpdit/core/error.hpp>
#include <cpdit/models/qwenimage/model.hpp>
#include <cpdit/nn/step_cache.hpp>

#include <algorithm>
#include <set>

namespace cpdit::models::qwenimage {

parallel::ContextParallelPlan qwenimage_plan() {
  using parallel::ContextParallelInput, parallel::ContextParallelOutput;
  parallel::ModulePlan pos_embed;  // image cos, image sin, text cos, text sin: (S, head_dim) each
  for (int i = 0; i < 4; ++i) pos_embed.outputs[i] = ContextParallelInput{0, 2, /*split_output=*/true};
  parallel::ModulePlan first_block;
  first_block.inputs = {{"hidden_states", ContextParallelInput{1, 3}},
                        {"encoder_hidden_states", ContextParallelInput{1, 3}}};
  parallel::ModulePlan every_block;
  every_block.inputs = {{"encoder_hidden_states_mask", ContextParallelInput{1, 2}},
                        {"modulate_index", ContextParallelInput{1, 2}}};
  parallel::ModulePlan proj_out;
  proj_out.gathers = {{0, ContextParallelOutput{1, 3}}};
  return {{"pos_embed", pos_embed},
          {"transformer_blocks.0", first_block},
          {"transformer_blocks.*", every_block},
          {"proj_out", proj_out}};
}

QwenImageTransformer2DModel::QwenImageTransformer2DModel(const QwenImageConfig& config)
    : config_((config.validate(), config)),
      img_in_(add_module<nn::Linear>("img_in", config.in_channels, config.inner_dim())),
      txt_norm_(add_module<nn::RMSNorm>("txt_norm", config.joint_attention_dim, 1e-6f)),
      txt_in_(add_module<nn::Linear>("txt_in", config.joint_attention_dim, config.inner_dim())),
      time_text_embed_(add_module<TimestepProjEmbeddings>("time_text_embed", config.inner_dim())),
      pos_embed_(add_module<PosEmbed>("pos_embed", config.axes_dims_rope)),
      transformer_blocks_(add_module<nn::ModuleList<TransformerBlock>>("transformer_blocks")),
      norm_out_(add_module<common::AdaLayerNormContinuous>("norm_out", config.inner_dim(), config.inner_dim(), 1e-6f)),
      proj_out_(add_module<nn::Linear>("proj_out", config.inner_dim(),
                                       config.patch_size * config.patch_size * config.output_channels())) {
  for (int64_t i = 0; i < config.num_layers; ++i)
    transformer_blocks_.append(config.inner_dim(), config.num_attention_heads, config.attention_head_dim);
}

namespace {
const std::set<std::string> kInputNames{"hidden_states", "encoder_hidden_states", "encoder_hidden_states_mask",
                                        "timestep", "img_shapes"};

// zero_cond_t's modulate_index I64 (B, N): per item, 0 on its first image segment's tokens (t), 1 on
// the later segments' (t = 0). Every item's segments must cover the `tokens` image tokens.
Tensor modulate_index(const Tensor& img_shapes, int64_t tokens) {
  const Tensor v = img_shapes.to(DType::i64).contiguous();
  const int64_t batch = v.size(0), segments = v.size(1);
  std::vector<int64_t> index;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t k = 0; k < segments; ++k) {
      const int64_t* s = v.data<int64_t>() + 3 * (b * segments + k);
      CPDIT_CHECK(s[0] > 0 && s[1] > 0 && s[2] > 0, invalid_argument, "Qwen-Image img_shapes: item ", b, " segment ",
                  k, " must have positive (frames, h, w)");
      index.insert(index.end(), size_t(s[0] * s[1] * s[2]), k == 0 ? 0 : 1);
    }
    CPDIT_CHECK(int64_t(index.size()) == (b + 1) * tokens, invalid_argument, "Qwen-Image img_shapes: item ", b,
                " describes ", int64_t(index.size()) - b * tokens, " image tokens, hidden_states has ", tokens);
  }
  Tensor out = Tensor::empty({batch, tokens}, DType::i64);
  std::copy(index.begin(), index.end(), out.data<int64_t>());
  return out;
}

// The image tokens img_shapes' first item describes (diffusers reads only that one).
int64_t image_tokens(const Tensor& img_shapes) {
  CPDIT_CHECK(img_shapes.dim() == 3 && img_shapes.size(2) == 3, invalid_argument,
              "Qwen-Image img_shapes must be I64 (B, K, 3), got ", img_shapes.describe());
  const Tensor v = img_shapes.to(DType::i64).contiguous();
  int64_t n = 0;
  for (int64_t k = 0; k < v.size(1); ++k) {
    const int64_t* s = v.data<int64_t>() + 3 * k;
    CPDIT_CHECK(s[0] > 0 && s[1] > 0 && s[2] > 0, invalid_argument, "Qwen-Image img_shapes: segment ", k,
                " must have positive (frames, h, w)");
    n += s[0] * s[1] * s[2];
  }
  return n;
}
}  // namespace

nn::TensorMap QwenImageTransformer2DModel::forward(const nn::TensorMap& inputs) const {
  for (const auto& [name, t] : inputs)
    CPDIT_CHECK(kInputNames.count(name), invalid_argument, "Qwen-Image forward takes no input '", name,
                "' (it takes hidden_states, encoder_hidden_states, encoder_hidden_states_mask, timestep, img_shapes)");
  nn::TensorMap args;
  for (const auto& name : kInputNames) {
    auto it = inputs.find(name);
    args[name] = it == inputs.end() ? Tensor() : it->second;
    CPDIT_CHECK(name == "encoder_hidden_states_mask" || args[name].defined(), invalid_argument,
                "Qwen-Image forward needs the input '", name, "'");
  }

  ForwardScope scope(*this);
  return {{"sample", with_hooks(std::move(args), [&](const nn::TensorMap& in) {
    const Tensor& latent = in.at("hidden_states");
    const Tensor& text = in.at("encoder_hidden_states");
    CPDIT_CHECK(latent.dim() == 3 && latent.size(2) == config_.in_channels, invalid_argument,
                "Qwen-Image hidden_states must be (B, N, ", config_.in_channels, "), got ", latent.describe());
    const int64_t batch = latent.size(0);
    CPDIT_CHECK(text.dim() == 3 && text.size(0) == batch && text.size(2) == config_.joint_attention_dim,
                invalid_argument, "Qwen-Image encoder_hidden_states must be (", batch, ", L, ",
                config_.joint_attention_dim, "), got ", text.describe());
    CPDIT_CHECK(image_tokens(in.at("img_shapes")) == latent.size(1), invalid_argument, "Qwen-Image img_shapes ",
                "describe ", image_tokens(in.at("img_shapes")), " image tokens, hidden_states has ", latent.size(1));
    Tensor mask = in.at("encoder_hidden_states_mask");
    if (mask.defined()) {
      CPDIT_CHECK(mask.dim() == 2 && mask.size(0) == batch && mask.size(1) == text.size(1), invalid_argument,
                  "Qwen-Image encoder_hidden_states_mask must be (", batch, ", ", text.size(1), "), got ",
                  mask.describe());
      mask = mask.to(DType::boolean);
    }
    const Tensor& timestep = in.at("timestep");
    CPDIT_CHECK(timestep.numel() == batch, invalid_argument, "Qwen-Image timestep must be (", batch, ",), got ",
                timestep.describe());

    Tensor x = img_in_.forward(latent.to(DType::f32));
    Tensor c = txt_in_.forward(txt_norm_.forward(text.to(DType::f32)));
    // zero_cond_t embeds [t; 0 · t] (2B rows) and lets each image token pick its half.
    const Tensor t = timestep.to(DType::f32).reshape({-1});
    const Tensor temb = time_text_embed_.forward(config_.zero_cond_t ? cat({t, Tensor::zeros(t.shape())}, 0) : t);
    const Tensor index = config_.zero_cond_t ? modulate_index(in.at("img_shapes"), latent.size(1)) : Tensor();
    auto rope = pos_embed_.forward(in.at("img_shapes"), text.size(1));
    // The joint attention sees [text; image]: its tables likewise (this rank's share of each).
    const Tensor cos = cat({rope[2], rope[0]}, 0), sin = cat({rope[3], rope[1]}, 0);
    // The blocks over the streams {image, text} (a step cache measures the image's).
    x = nn::run_blocks(transformer_blocks_.size(), {x, c}, [&](size_t i, const std::vector<Tensor>& s) {
      auto out = transformer_blocks_[i].forward(s[0], s[1], mask, temb, cos, sin, index);
      return std::vector<Tensor>{out[1], out[0]};
    })[0];
    const Tensor head_temb = config_.zero_cond_t ? temb.narrow(0, 0, batch) : temb;  // the t half
    return std::vector<Tensor>{proj_out_.forward(norm_out_.forward(x, head_temb))};
  })[0]}};
}

}  // namespace cpdit::models::qwenimage
