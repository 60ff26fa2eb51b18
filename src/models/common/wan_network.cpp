#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/common/wan_network.hpp>
#include <cpdit/nn/step_cache.hpp>

namespace cpdit::models::common::wan {

Wan21Network::Wan21Network(const WanConfig& config, SinusoidPrecision sinusoid)
    : rope_((config.validate(), add_module<RotaryPosEmbed>("rope", config.attention_head_dim, config.patch_size,
                                                           config.rope_max_seq_len))),
      patch_embedding_(add_module<PatchEmbedding>("patch_embedding", config.in_channels, config.inner_dim(),
                                                  config.patch_size)),
      condition_embedder_(add_module<ConditionEmbedder>("condition_embedder", config.inner_dim(), config.freq_dim,
                                                        config.text_dim, sinusoid, config.image_dim,
                                                        config.pos_embed_seq_len)),
      patch_size_(config.patch_size),
      blocks_(add_module<nn::ModuleList<Block>>("blocks")),
      norm_out_(add_module<nn::LayerNorm>("norm_out", config.inner_dim(), config.eps, /*affine=*/false)),
      proj_out_(add_module<nn::Linear>("proj_out", config.inner_dim(), config.out_channels * config.patch_volume())),
      scale_shift_table_(add_parameter("scale_shift_table", {1, 2, config.inner_dim()})) {
  for (int64_t i = 0; i < config.num_layers; ++i)
    blocks_.append(config.inner_dim(), config.num_attention_heads, config.attention_head_dim, config.ffn_dim,
                   config.cross_attn_norm, config.eps, /*image_keys=*/config.added_kv_proj_dim > 0);
}

Tensor Wan21Network::image_tokens(const nn::TensorMap& inputs) {
  auto it = inputs.find("encoder_hidden_states_image");
  return it == inputs.end() ? Tensor() : it->second;
}

Tensor Wan21Network::blocks_and_head(Tensor x, const std::vector<Tensor>& cond, const Tensor& timestep_proj,
                                     const Tensor& temb, const std::vector<Tensor>& rope, const attention::Mask& mask,
                                     std::array<int64_t, 3> grid) const {
  const Tensor image = cond.size() > 3 ? cond[3] : Tensor();
  x = nn::run_blocks(blocks_.size(), {x}, [&](size_t i, const std::vector<Tensor>& s) {
    return std::vector<Tensor>{blocks_[i].forward(s[0], cond[2], timestep_proj, rope[0], rope[1], mask, image)};
  })[0];
  // The output head takes temb itself, not timestep_proj: shift, scale in that order.
  const int64_t batch = temb.size(0), dim = temb.size(-1);
  auto head = scale_shift_modulation(scale_shift_table_.value, temb.dim() == 2
                                                                   ? temb.reshape({batch, 1, dim})
                                                                   : temb.reshape({batch, temb.size(1), 1, dim}));
  x = kernels::modulate(norm_out_.forward(x), head[1], head[0]);
  return unpatchify(proj_out_.forward(x), patch_size_, grid);
}

}  // namespace cpdit::models::common::wan
