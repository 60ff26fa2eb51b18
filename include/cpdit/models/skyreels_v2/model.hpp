#pragma once
// SkyReelsV2Transformer3DModel (SkyReels-V2 text-to-video with diffusion forcing): the Wan 2.1 network
// of models/common with one timestep per latent frame, the fps embedding (inject_sample_info) and
// block-causal self-attention over frame blocks (num_frame_per_block > 1), plus the context-parallel
// plan diffusers does not have for it. Parameters carry the diffusers key names.
#include <cpdit/models/common/wan_config.hpp>
#include <cpdit/models/common/wan_layers.hpp>
#include <cpdit/models/common/wan_network.hpp>
#include <cpdit/nn/embedding.hpp>

#include <optional>
#include <string>

namespace cpdit::models::skyreels_v2 {

// The Wan 2.1 fields (image_dim and added_kv_proj_dim set for the I2V models), and what SkyReels-V2 adds.
struct SkyReelsV2Config : common::wan::WanConfig {
  bool inject_sample_info = false;  // fps_embedding (2 rows: 16 fps or not) and fps_projection
  int64_t num_frame_per_block = 1;  // > 1: a latent frame block attends to itself and earlier blocks

  // The Wan fields and the SkyReels-V2 ones; missing (or null) fields keep the values of `base`.
  static SkyReelsV2Config from_json(const nlohmann::json& j, SkyReelsV2Config base);
  // What the tensors tell: the Wan fields, and inject_sample_info when the fps weights are there.
  static SkyReelsV2Config infer(const nn::StateDict& state);
  void validate() const;
};

struct SkyReelsV2Checkpoint {
  SkyReelsV2Config config;
  nn::StateDict state;  // diffusers keys
};

// Read as a Wan checkpoint is (a diffusers folder, an index or one file; config inferred from the
// tensors, then overridden field by field by `config_path`, else by the folder's config.json).
SkyReelsV2Checkpoint read_skyreels_v2_checkpoint(const std::string& path,
                                                 const std::optional<std::string>& config_path = {});

// Our plan, as data (diffusers has none for this class). Every per-token tensor is split on its
// token dim, so each rank computes only its own tokens; the text and the image tokens (I2V) stay
// whole, so cross-attention attends to every one of them locally:
//   rope outputs       cos, sin (1, S, 1, head_dim), computed for the whole grid, split afterwards;
//   blocks.0 input     hidden_states (B, S, D), split after the patch embedding of the full latent;
//   frame_to_tokens    temb (B, S, D) for the output head's shift/scale and timestep_proj
//     outputs          (B, S, 6, D) for every block's modulation, expanded from one per frame, split;
//   proj_out output    gathered, so unpatchify sees every token.
// Every split and gather follows the model's token layout: zigzag under block-causal attention, so
// each ring rank holds an early and a late range of frames and the ranks see about as many keys.
// Block-causal attention needs no plan entry: the mask is a rule on global positions, which ring,
// Ulysses and unified attention evaluate per KV chunk from that layout.
parallel::ContextParallelPlan skyreels_v2_plan();

// Repeats each frame's timestep embedding over that frame's tokens: forward(temb (B, F, D),
// timestep_proj (B, F, 6D)) returns (temb (B, S, D), timestep_proj (B, S, 6, D)), S = F x tokens_per_frame.
class FrameToTokens : public nn::Module {
 public:
  std::vector<Tensor> forward(const Tensor& temb, const Tensor& timestep_proj, int64_t tokens_per_frame) const;
};

class SkyReelsV2Transformer3DModel : public common::wan::Wan21Network {
 public:
  explicit SkyReelsV2Transformer3DModel(const SkyReelsV2Config& config);
  const SkyReelsV2Config& config() const { return config_; }

  // Inputs by diffusers' argument names: hidden_states (B, in_channels, F, H, W); timestep raw in
  // [0, 1000], (B, F') one per latent frame when enable_diffusion_forcing (BOOL (1,)) is true, else
  // (B,); encoder_hidden_states (B, L, text_dim); fps I64 (1,) or (B,), each 0 or 1, required when
  // inject_sample_info and ignored otherwise (as diffusers does); encoder_hidden_states_image
  // (B, 257, image_dim), the image encoder's tokens, for the I2V models (image_dim set) only.
  // Returns {`sample`: (B, out_channels, F, H, W)}.
  nn::TensorMap forward(const nn::TensorMap& inputs) const override;

  parallel::ContextParallelPlan context_parallel_plan() const override { return skyreels_v2_plan(); }
  // Zigzag when frame blocks are causal (num_frame_per_block > 1): a contiguous ring would give its
  // first rank only its own frames to attend to and its last rank every frame.
  parallel::TokenLayout token_layout() const override;

 private:
  // timestep_proj (B, F, 6D) plus the fps projection of each batch item (diffusers 0.42.1 adds item
  // 0's to every item of a batch of 2; this adds each item's own).
  Tensor add_fps(const Tensor& timestep_proj, const Tensor& fps, int64_t batch) const;

  SkyReelsV2Config config_;
  FrameToTokens& frame_to_tokens_;
  nn::Embedding* fps_embedding_ = nullptr;  // inject_sample_info only
  nn::Linear* fps_hidden_ = nullptr;        // fps_projection.net.0.proj (SiLU after it)
  nn::Linear* fps_out_ = nullptr;           // fps_projection.net.2
};

// A model with the checkpoint's weights bound (shared with the checkpoint where already in the target dtype).
std::unique_ptr<SkyReelsV2Transformer3DModel> load_skyreels_v2(const SkyReelsV2Checkpoint& checkpoint,
                                                               const nn::LoadOptions& options = {});

}  // namespace cpdit::models::skyreels_v2
