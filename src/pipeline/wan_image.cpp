#include <cpdit/core/error.hpp>
#include <cpdit/models/text/clip_vision.hpp>
#include <cpdit/models/vae/autoencoder_kl_wan.hpp>
#include <cpdit/pipeline/image_start.hpp>
#include <cpdit/pipeline/vae_decode.hpp>
#include <cpdit/pipeline/wan_image.hpp>

#include <algorithm>
#include <vector>

namespace cpdit::pipeline {

bool wan_takes_image(const models::wan::WanConfig& config) {
  return config.out_channels > 0 && config.in_channels > config.out_channels;
}

Tensor wan_video_latents(const models::LoadedModel& vae, const Tensor& video, const Tensor& noise) {
  const auto* config = std::any_cast<models::vae::WanVaeConfig>(&vae.config);
  CPDIT_CHECK(config, invalid_argument, "these images are encoded by a Wan-layout VAE (AutoencoderKLWan); the "
              "pipeline's VAE is ", vae.class_name);
  CPDIT_CHECK(video.dim() == 5 && video.size(1) == 3, invalid_argument, "a video to encode is (B, 3, F, H, W), got ",
              video.describe());
  const std::unique_ptr<nn::Model> model = vae.replica();
  const auto& wan = dynamic_cast<const models::vae::AutoencoderKLWan&>(*model);
  const Tensor x = video.contiguous();
  const Tensor latents =
      noise.defined() ? posterior_sample(wan.encode_moments(x), config->z_dim, noise) : wan.encode(x);
  return normalize_wan_latents(latents, *config);
}

namespace {

// The frame mask (1, temporal, F', h, w): channel c of latent frame f is entry temporal * f + c of the
// pixel frames' mask with frame 0 counted `temporal` times, as prepare_latents views and transposes it.
Tensor frame_mask(int64_t frames, int64_t temporal, bool last_given, int64_t latent_frames, int64_t h, int64_t w) {
  std::vector<float> given(size_t(temporal), 1.0f);  // frame 0, `temporal` times
  for (int64_t f = 1; f < frames; ++f) given.push_back(last_given && f == frames - 1 ? 1.0f : 0.0f);
  CPDIT_CHECK(int64_t(given.size()) == temporal * latent_frames, internal, "the VAE made ", latent_frames,
              " latent frames of ", frames);
  Tensor mask = Tensor::empty({1, temporal, latent_frames, h, w});
  float* out = mask.data<float>();
  for (int64_t c = 0; c < temporal; ++c)
    for (int64_t f = 0; f < latent_frames; ++f)
      std::fill_n(out + (c * latent_frames + f) * h * w, h * w, given[size_t(temporal * f + c)]);
  return mask;
}

}  // namespace

Tensor wan_image_condition(const models::LoadedModel& vae, const Tensor& first, const Tensor& last, int64_t frames,
                           int64_t temporal) {
  CPDIT_CHECK(first.dim() == 4 && first.size(0) == 1 && first.size(1) == 3, invalid_argument,
              "the first image is (1, 3, H, W), got ", first.describe());
  CPDIT_CHECK(!last.defined() || last.shape() == first.shape(), invalid_argument, "the last image is ",
              last.describe(), ", the first ", first.describe(), ": both at the video's size");
  CPDIT_CHECK(frames >= (last.defined() ? 2 : 1) && temporal >= 1 && (frames - 1) % temporal == 0, invalid_argument,
              "a video of ", frames, " frames cannot hold the given images in whole latent frames (", temporal,
              " k + 1 frames)");
  const int64_t height = first.size(2), width = first.size(3);
  Tensor video = Tensor::zeros({1, 3, frames, height, width});
  float* v = video.data<float>();
  auto put = [&](const Tensor& image, int64_t frame) {
    const Tensor pixels = image.to(DType::f32).contiguous();
    for (int64_t c = 0; c < 3; ++c)
      std::copy_n(pixels.data<float>() + c * height * width, height * width,
                  v + (c * frames + frame) * height * width);
  };
  put(first, 0);
  if (last.defined()) put(last, frames - 1);
  const Tensor latents = wan_video_latents(vae, video);
  const Tensor mask = frame_mask(frames, temporal, last.defined(), latents.size(2), latents.size(3), latents.size(4));
  return cat({mask, latents}, 1);
}

Tensor wan_image_embeds(const models::LoadedModel& image_encoder, const Tensor& pixel_values) {
  const auto* config = std::any_cast<models::text::ClipVisionConfig>(&image_encoder.config);
  CPDIT_CHECK(config, invalid_argument, "Wan image-to-video encodes its images with CLIPVisionModel; the pipeline's "
              "image encoder is ", image_encoder.class_name);
  CPDIT_CHECK(config->num_hidden_layers >= 1, invalid_argument, "a CLIPVisionModel without layers has no "
              "penultimate hidden state");
  const std::unique_ptr<nn::Model> model = image_encoder.replica();
  nn::TensorMap out = model->forward({{"pixel_values", pixel_values}});
  return out.at(models::text::clip_hidden_state_name(config->num_hidden_layers - 1));
}

}  // namespace cpdit::pipeline
