#pragma once
// A quick look at FLUX.1 latents without the VAE: each latent pixel mapped to RGB by a fixed linear
// projection of its 16 channels, then enlarged 8x to the image size.
//
// The coefficients are ComfyUI's for the FLUX.1 latent space (comfy/latent_formats.py, class Flux:
// latent_rgb_factors and latent_rgb_factors_bias, a least-squares fit of decoded images against
// latents), applied to the latents the transformer works on, and mapped from [-1, 1] to [0, 255] as
// its previewer does.
#include <cpdit/core/tensor.hpp>

#include <cstdint>
#include <vector>

namespace cpdit::pipeline {

// latents (B, 16, h, w); returns the RGB bytes of image `index` of the batch, (8h) x (8w) x 3.
std::vector<uint8_t> flux_latent_preview(const Tensor& latents, int64_t index = 0);

}  // namespace cpdit::pipeline
