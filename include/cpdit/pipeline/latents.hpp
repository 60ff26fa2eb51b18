#pragma once
// FLUX.1 latents as the diffusers Flux pipeline lays them out: VAE latents (B, C, h, w) with
// h = H_px/f, w = W_px/f (f the VAE scale factor, 8 for FLUX.1), packed into 2×2 patches as tokens
// (B, (h/2)·(w/2), 4C) with token channel index c·4 + dy·2 + dx, row-major over the (h/2) × (w/2)
// token grid; and the position ids that go with them.
#include <cpdit/core/tensor.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace cpdit::pipeline {

struct FluxLatentShape {
  int64_t batch = 1, channels = 16, height = 0, width = 0;  // the unpacked latent (B, C, h, w)
  int64_t tokens() const { return (height / 2) * (width / 2); }
  Shape unpacked() const { return {batch, channels, height, width}; }
  Shape packed() const { return {batch, tokens(), channels * 4}; }
};

// The latent shape for an image of height × width pixels; both must be positive multiples of
// 2 · vae_scale_factor (the VAE's factor, 2^(len(block_out_channels) - 1), 8 for FLUX.1's, times the
// 2×2 packing), otherwise an invalid_argument error names the nearest sizes.
FluxLatentShape flux_latent_shape(int64_t height_px, int64_t width_px, int64_t channels = 16,
                                  int64_t batch = 1, int64_t vae_scale_factor = 8);

// Pixels per latent of an AutoencoderKL, from its config as diffusers derives it:
// 2^(len(block_out_channels) - 1). `source` names the file in errors.
int64_t kl_vae_scale_factor(const nlohmann::json& vae_config, const std::string& source);

// (B, C, h, w) → (B, (h/2)·(w/2), 4C), and back. h and w must be even.
Tensor flux_pack(const Tensor& latents);

// `t` (1, ...) repeated `batch` times along dim 0, as the pipelines repeat one image's tensors over the batch.
Tensor repeated_over_batch(const Tensor& t, int64_t batch);
Tensor flux_unpack(const Tensor& packed, int64_t height, int64_t width);

// Tokens [token_begin, token_begin + token_count) of flux_pack(randn(shape.unpacked(), seed)),
// computed without the rest: what one rank holds of the initial noise.
Tensor flux_packed_noise(const FluxLatentShape& shape, uint64_t seed, int64_t token_begin,
                         int64_t token_count);

// Position ids (f32): image tokens (N, 3) with row i·w' + j = (0, i, j) over the packed grid
// h' × w'; text tokens (L, 3) all zero.
Tensor flux_image_ids(int64_t packed_height, int64_t packed_width);
Tensor flux_text_ids(int64_t text_length);

}  // namespace cpdit::pipeline
