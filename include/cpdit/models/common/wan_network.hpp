#pragma once
// What every Wan 2.1 network holds and runs the same way, under diffusers' names: rope,
// patch_embedding, condition_embedder, the blocks, and the output head (norm_out, scale_shift_table,
// proj_out). WanTransformer3DModel and SkyReelsV2Transformer3DModel build on it; each reads its own
// inputs and makes its own timestep modulation (one per clip, per token, or per frame).
#include <cpdit/models/common/wan_config.hpp>
#include <cpdit/models/common/wan_layers.hpp>
#include <cpdit/nn/model.hpp>

#include <array>
#include <vector>

namespace cpdit::models::common::wan {

class Wan21Network : public nn::Model {
 protected:
  // Checks the Wan fields of `config` (WanConfig::validate) before building anything.
  Wan21Network(const WanConfig& config, SinusoidPrecision sinusoid);

  // The blocks over the patch tokens x (B, S, D) with the text (the condition embedder's third
  // output), timestep_proj (B, 6, D) or per token (B, S, 6, D), the RoPE tables and the
  // self-attention mask rule; then the output head, shifted and scaled by temb ((B, D) or per token
  // (B, S, D)), unpatchified over `grid` to (B, out_channels, F, H, W). `cond` is the condition
  // embedder's output: its third entry the projected text, its fourth (I2V only) the projected image tokens.
  Tensor blocks_and_head(Tensor x, const std::vector<Tensor>& cond, const Tensor& timestep_proj, const Tensor& temb,
                         const std::vector<Tensor>& rope, const attention::Mask& mask,
                         std::array<int64_t, 3> grid) const;

  // The input encoder_hidden_states_image of `inputs` (the image encoder's tokens of an I2V model), else
  // undefined; the condition embedder checks it against the config.
  static Tensor image_tokens(const nn::TensorMap& inputs);

  RotaryPosEmbed& rope_;
  PatchEmbedding& patch_embedding_;
  ConditionEmbedder& condition_embedder_;

 private:
  std::array<int64_t, 3> patch_size_;
  nn::ModuleList<Block>& blocks_;
  nn::LayerNorm& norm_out_;
  nn::Linear& proj_out_;
  nn::Parameter& scale_shift_table_;  // [1, 2, D]: shift, scale of the output head
};

}  // namespace cpdit::models::common::wan
