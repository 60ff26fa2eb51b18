#pragma once
// CLIPVisionModel, the image encoder of Wan 2.1's image-to-video pipelines, computing what transformers
// computes, with its module and parameter names (without the `vision_model.` prefix of older
// checkpoints; the loader strips it). Its encoder layers are the text tower's (clip.hpp), unmasked.
//   x = [class_embedding; patch_embedding(pixel_values), patch rows in order] + position_embedding(0..P);
//   hidden_states_0 = pre_layrnorm(x); hidden_states_i = layer i-1 of hidden_states_{i-1};
//   last_hidden_state = hidden_states_N; pooler_output = post_layernorm(last_hidden_state[:, 0]).
// Like the text encoders it runs whole on one rank (257 tokens for ViT-H/14), so its plan is empty.
#include <cpdit/models/text/clip.hpp>
#include <cpdit/models/text/config.hpp>
#include <cpdit/nn/embedding.hpp>
#include <cpdit/nn/layers.hpp>
#include <cpdit/nn/model.hpp>

#include <string>

namespace cpdit::models::text {

// patch_embedding: a convolution with kernel = stride = patch_size and no bias, weight
// (D, num_channels, patch_size, patch_size).
class ClipPatchEmbedding : public nn::Module {
 public:
  explicit ClipPatchEmbedding(const ClipVisionConfig& config);
  // pixel_values (B, C, H, W) -> (B, H/p * W/p, D), the patches row by row.
  Tensor forward(const Tensor& pixel_values) const;

 private:
  int64_t patch_size_;
  nn::Parameter& weight_;
};

class ClipVisionEmbeddings : public nn::Module {
 public:
  explicit ClipVisionEmbeddings(const ClipVisionConfig& config);
  // pixel_values (B, num_channels, image_size, image_size) -> (B, 1 + patches, D).
  Tensor forward(const Tensor& pixel_values) const;

 private:
  ClipVisionConfig config_;
  nn::Parameter& class_embedding_;
  ClipPatchEmbedding& patch_embedding_;
  nn::Embedding& position_embedding_;
};

// The name of hidden state `i` among CLIPVisionModel's outputs (transformers' hidden_states[i]).
std::string clip_hidden_state_name(int64_t i);

class CLIPVisionModel : public nn::Model {
 public:
  explicit CLIPVisionModel(const ClipVisionConfig& config);
  const ClipVisionConfig& config() const { return config_; }
  // pixel_values (B, num_channels, image_size, image_size), as CLIPImageProcessor makes them ->
  // last_hidden_state and hidden_states_0 ... hidden_states_N (B, 1 + patches, D), pooler_output (B, D).
  nn::TensorMap forward(const nn::TensorMap& inputs) const override;
  parallel::ContextParallelPlan context_parallel_plan() const override { return {}; }

 private:
  ClipVisionConfig config_;
  ClipVisionEmbeddings& embeddings_;
  nn::LayerNorm& pre_layrnorm_;  // transformers' spelling
  nn::ModuleList<ClipEncoderLayer>& layers_;
  nn::LayerNorm& post_layernorm_;
};

}  // namespace cpdit::models::text
