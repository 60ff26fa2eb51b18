#pragma once
// The image conditioning of SkyReels-V2 image-to-video by diffusion forcing
// (SkyReelsV2DiffusionForcingImageToVideoPipeline), which needs no image encoder: the first (and an
// optional last) image as the pipeline's video processor hands it to the Wan VAE; the VAE's latents,
// normalised as the transformer sees latents (normalize_wan_latents, vae_decode.hpp), are what
// generate_skyreels_v2 takes as SkyReelsGenerateOptions::first_image_latents / last_image_latents.
#include <cpdit/core/tensor.hpp>
#include <cpdit/models/registry.hpp>

#include <cstdint>
#include <string>

namespace cpdit::pipeline {

// A picture (PNG, JPEG or WebP: io::read_image) as video_processor.preprocess makes it for a video of
// height x width: resized to it as PIL's Lanczos resize does (bit for bit; the aspect ratio is not kept,
// nothing is cropped), then (1, 3, H, W) f32, each 8-bit value x as x / 255 * 2 - 1.
Tensor image_pixels(const std::string& path, int64_t height, int64_t width);

// What the pipeline's prepare_latents makes of images: `pixels` (B, 3, H, W) from image_pixels, each a
// one-frame video through wan_video_latents (wan_image.hpp): (B, z_dim, 1, H/8, W/8) f32. On this
// thread, one rank.
Tensor image_latents(const models::LoadedModel& vae, const Tensor& pixels);

}  // namespace cpdit::pipeline
