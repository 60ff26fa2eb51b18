#pragma once
// Wan 2.1 image-to-video and first-last-frame-to-video (diffusers' WanImageToVideoPipeline): what the
// images become before the denoising loop. generate_wan feeds the transformer cat(latents, condition)
// on channels at every step and the image tokens in both guidance passes (WanGenerateOptions::image).
#include <cpdit/core/tensor.hpp>
#include <cpdit/models/registry.hpp>
#include <cpdit/models/wan/model.hpp>

#include <cstdint>

namespace cpdit::pipeline {

struct WanImageConditioning {
  // (1, temporal + z_dim, F', h, w): the frame mask's channels, then the VAE latents (prepare_latents').
  Tensor condition;
  // (images, tokens, image_dim): CLIP's image tokens (encode_image's); undefined for a model without
  // image_dim, whose images enter through `condition` alone.
  Tensor image_embeds;
};

// True for a Wan network that takes an image condition: more input channels than output (16 + 4 + 16
// = 36 in Wan 2.1's image-to-video checkpoints).
bool wan_takes_image(const models::wan::WanConfig& config);

// `video` (B, 3, F, H, W) in [-1, 1] through `vae` (a LoadedModel of a Wan-layout VAE; any other VAE is
// refused in one line), normalised by normalize_wan_latents: (B, z_dim, F', H/8, W/8) f32. Without `noise`
// the posterior's mode (retrieve_latents with sample_mode="argmax", as the image-to-video pipelines encode
// their images); with it a sample (posterior_sample, as image-to-image's _encode_vae_image). On this
// thread, one rank.
Tensor wan_video_latents(const models::LoadedModel& vae, const Tensor& video, const Tensor& noise = {});

// prepare_latents' condition. `first` (and `last`, or undefined) (1, 3, H, W), as image_pixels makes
// them at the video's size, are frame 0 (and frame `frames` - 1) of a video of zeros, which
// wan_video_latents encodes.
// The mask has `temporal` channels per latent frame: pixel frame 0 counted `temporal` times, then one per
// pixel frame, 1 for the given frames, 0 for the rest. On this thread, one rank.
Tensor wan_image_condition(const models::LoadedModel& vae, const Tensor& first, const Tensor& last, int64_t frames,
                           int64_t temporal);

// encode_image: the penultimate hidden states (transformers' hidden_states[-2]) of `image_encoder` (a
// LoadedModel of CLIPVisionModel or CLIPVisionModelWithProjection) on `pixel_values` (images, 3, S, S)
// from clip_image_pixels: (images, 1 + patches, hidden). On this thread, one rank.
Tensor wan_image_embeds(const models::LoadedModel& image_encoder, const Tensor& pixel_values);

}  // namespace cpdit::pipeline
