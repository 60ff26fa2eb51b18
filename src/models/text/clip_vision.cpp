#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/text/clip_vision.hpp>

namespace cpdit::models::text {

namespace k = kernels;

ClipPatchEmbedding::ClipPatchEmbedding(const ClipVisionConfig& config)
    : patch_size_(config.patch_size),
      weight_(add_parameter("weight", {config.hidden_size, config.num_channels, config.patch_size, config.patch_size})) {}

Tensor ClipPatchEmbedding::forward(const Tensor& pixel_values) const {
  return with_hooks({{"pixel_values", pixel_values}}, [&](const nn::TensorMap& in) {
    const Tensor& x = in.at("pixel_values");
    // The 2-D convolution as patch_embed's one-frame 3-D case.
    const Tensor& w = weight_.value.values("CLIP patch_embedding");
    const Weight weight(w.contiguous().reshape({w.size(0), w.size(1), 1, w.size(2), w.size(3)}));
    const Tensor video = x.contiguous().reshape({x.size(0), x.size(1), 1, x.size(2), x.size(3)});
    return std::vector<Tensor>{k::patch_embed(video, weight, Tensor(), {1, patch_size_, patch_size_})};
  })[0];
}

ClipVisionEmbeddings::ClipVisionEmbeddings(const ClipVisionConfig& config)
    : config_(config),
      class_embedding_(add_parameter("class_embedding", {config.hidden_size})),
      patch_embedding_(add_module<ClipPatchEmbedding>("patch_embedding", config)),
      position_embedding_(add_module<nn::Embedding>("position_embedding", config.patches() + 1, config.hidden_size)) {}

Tensor ClipVisionEmbeddings::forward(const Tensor& pixel_values) const {
  return with_hooks({{"pixel_values", pixel_values}}, [&](const nn::TensorMap& in) {
    const Tensor& x = in.at("pixel_values");
    const int64_t size = config_.image_size;
    CPDIT_CHECK(x.dim() == 4 && x.size(1) == config_.num_channels && x.size(2) == size && x.size(3) == size,
                invalid_argument, "CLIPVisionModel pixel_values must be (B, ", config_.num_channels, ", ", size, ", ",
                size, "), got ", x.describe());
    const int64_t batch = x.size(0), tokens = config_.patches() + 1, width = config_.hidden_size;
    const Tensor patches = patch_embedding_.forward(x);
    const Tensor cls = class_embedding_.value.values("CLIP class_embedding").to(DType::f32).reshape({1, 1, width});
    std::vector<Tensor> rows;
    for (int64_t b = 0; b < batch; ++b) rows.push_back(cat({cls, patches.narrow(0, b, 1)}, 1));
    Tensor positions = Tensor::empty({1, tokens}, DType::i64);
    for (int64_t t = 0; t < tokens; ++t) positions.data<int64_t>()[t] = t;
    return std::vector<Tensor>{k::add(cat(rows, 0), position_embedding_.forward(positions))};
  })[0];
}

std::string clip_hidden_state_name(int64_t i) { return "hidden_states_" + std::to_string(i); }

CLIPVisionModel::CLIPVisionModel(const ClipVisionConfig& config)
    : config_((config.validate(), config)),
      embeddings_(add_module<ClipVisionEmbeddings>("embeddings", config_)),
      pre_layrnorm_(add_module<nn::LayerNorm>("pre_layrnorm", config_.hidden_size, config_.layer_norm_eps, true)),
      layers_(add_module<nn::Container>("encoder").add_module<nn::ModuleList<ClipEncoderLayer>>("layers")),
      post_layernorm_(add_module<nn::LayerNorm>("post_layernorm", config_.hidden_size, config_.layer_norm_eps, true)) {
  for (int64_t i = 0; i < config_.num_hidden_layers; ++i) layers_.append(config_);
}

nn::TensorMap CLIPVisionModel::forward(const nn::TensorMap& inputs) const {
  CPDIT_CHECK(!parallel_enabled(), unsupported,
              "CLIPVisionModel runs whole on one rank (an image is a few hundred tokens): run it without --ring/--ulysses");
  for (const auto& [name, t] : inputs)
    CPDIT_CHECK(name == "pixel_values", invalid_argument, "CLIPVisionModel forward takes no input '", name,
                "' (it takes pixel_values)");
  auto pixels = inputs.find("pixel_values");
  CPDIT_CHECK(pixels != inputs.end() && pixels->second.defined(), invalid_argument,
              "CLIPVisionModel forward needs pixel_values");
  ForwardScope scope(*this);
  nn::TensorMap out;
  Tensor x = pre_layrnorm_.forward(embeddings_.forward(pixels->second.to(DType::f32)));
  out[clip_hidden_state_name(0)] = x;
  int64_t i = 0;
  for (ClipEncoderLayer* layer : layers_) {
    x = layer->forward(x, attention::Mask{});
    out[clip_hidden_state_name(++i)] = x;
  }
  out["last_hidden_state"] = x;
  out["pooler_output"] = post_layernorm_.forward(x.narrow(1, 0, 1).contiguous().reshape({x.size(0), x.size(2)}));
  return out;
}

}  // namespace cpdit::models::text
