#pragma once
// Timestep and text embeddings shared by the DiT families, named as diffusers names them:
// the sinusoid of Timesteps and the two-layer MLPs of TimestepEmbedding and PixArtAlphaTextProjection.
#include <cpdit/models/common/activation.hpp>
#include <cpdit/nn/layers.hpp>

namespace cpdit::models::common {

// diffusers' Timesteps(channels, flip_sin_to_cos, downscale_freq_shift, scale). FLUX.1, Wan, LTX and
// Qwen-Image all flip (cos half first) with shift 0; Qwen-Image scales by 1000 inside.
struct SinusoidOptions {
  bool flip_sin_to_cos = true;
  float downscale_freq_shift = 0.0f;
  float scale = 1.0f;
};

// t (B,) -> (B, channels): [cos(s t f_j), sin(s t f_j)] (flipped order), f_j = exp(-ln(10000) j / (half - shift)),
// in float32 step by step as diffusers computes it (the fixtures check the last bits of these arguments).
Tensor timestep_sinusoid(const Tensor& t, int64_t channels, const SinusoidOptions& options = {});

// t (B,) -> (B, channels): [cos(t w_j), sin(t w_j)], w_j = 1 / 10000^(j / half), all in float64 and
// rounded to float32 once at the end, as diffusers' get_1d_sincos_pos_embed_from_grid (SkyReels-V2).
Tensor timestep_sinusoid_f64(const Tensor& t, int64_t channels);

// linear_1 (in -> hidden), activation, linear_2 (hidden -> out): TimestepEmbedding (SiLU, out = hidden)
// and PixArtAlphaTextProjection (SiLU or GELU-tanh).
class MlpEmbedder : public nn::Module {
 public:
  MlpEmbedder(int64_t in, int64_t hidden, Activation activation, int64_t out = 0);  // out 0: hidden
  Tensor forward(const Tensor& x) const;

 private:
  nn::Linear& linear_1_;
  nn::Linear& linear_2_;
  Activation activation_;
};

}  // namespace cpdit::models::common
