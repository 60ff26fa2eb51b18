#pragma once
// The image conditioning of SkyReels-V2 image-to-video by diffusion forcing
// (SkyReelsV2DiffusionForcingImageToVideoPipeline), which needs no image encoder: the first (and an
// optional last) image as the pipeline's video processor hands it to the Wan VAE; the VAE's latents,
// normalised as the transformer sees latents (normalize_wan_latents, vae_decode.hpp), are what
// generate_skyreels_v2 takes as SkyReelsGenerateOptions::first_image_latents / last_image_latents.
#include <cpdit/core/tensor.hpp>

#include <cstdint>
#include <string>

namespace cpdit::pipeline {

// A PNG as video_processor.preprocess makes it for a video of height x width: (1, 3, H, W) f32, each
// 8-bit value x as x / 255 * 2 - 1. diffusers resizes an image of another size (Lanczos); this refuses
// one, in one line naming both sizes, so the video starts from exactly the pixels given.
Tensor image_pixels(const std::string& png_path, int64_t height, int64_t width);

}  // namespace cpdit::pipeline
