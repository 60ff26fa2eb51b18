#include <cpdit/core/error.hpp>
#include <cpdit/pipeline/latents.hpp>
#include <cpdit/pipeline/random.hpp>

#include <string>
#include <vector>

namespace cpdit::pipeline {

namespace {

// A side must be a multiple of the VAE factor times the 2x2 packing (16 for FLUX.1's VAE).
void check_image_side(const char* name, int64_t pixels, int64_t vae_scale_factor) {
  const int64_t step = 2 * vae_scale_factor;
  if (pixels > 0 && pixels % step == 0) return;
  const int64_t below = pixels / step * step;
  const std::string nearest =
      below > 0 ? std::to_string(below) + " or " + std::to_string(below + step) : std::to_string(step);
  fail(ErrorKind::invalid_argument, name, " ", pixels, " is not a positive multiple of ", step,
       " (FLUX.1 latents are 1/", vae_scale_factor, " of the image, packed 2x2); use ", nearest);
}

void check_even(const char* what, int64_t height, int64_t width) {
  CPDIT_CHECK(height > 0 && width > 0 && height % 2 == 0 && width % 2 == 0, invalid_argument, what,
              ": latent height and width must be positive and even, got ", height, " x ", width);
}

}  // namespace

FluxLatentShape flux_latent_shape(int64_t height_px, int64_t width_px, int64_t channels,
                                  int64_t batch, int64_t vae_scale_factor) {
  CPDIT_CHECK(vae_scale_factor >= 1, invalid_argument, "flux_latent_shape: VAE scale factor ", vae_scale_factor,
              " must be positive");
  check_image_side("height", height_px, vae_scale_factor);
  check_image_side("width", width_px, vae_scale_factor);
  CPDIT_CHECK(channels > 0 && batch > 0, invalid_argument, "flux_latent_shape: channels ", channels,
              " and batch ", batch, " must be positive");
  return {batch, channels, height_px / vae_scale_factor, width_px / vae_scale_factor};
}

int64_t kl_vae_scale_factor(const nlohmann::json& vae_config, const std::string& source) {
  const auto it = vae_config.find("block_out_channels");
  CPDIT_CHECK(it != vae_config.end() && it->is_array() && !it->empty() && it->size() <= 8, invalid_argument, source,
              ": block_out_channels must be a list of 1 to 8 widths (the VAE's scale factor is 2^(its length - 1))");
  return int64_t(1) << (it->size() - 1);
}

Tensor repeated_over_batch(const Tensor& t, int64_t batch) {
  return batch == 1 ? t : cat(std::vector<Tensor>(size_t(batch), t), 0);
}

Tensor flux_pack(const Tensor& latents) {
  CPDIT_CHECK(latents.dim() == 4, invalid_argument, "flux_pack: latents must be (B, C, h, w), got ",
              latents.describe());
  const int64_t b = latents.size(0), c = latents.size(1), h = latents.size(2), w = latents.size(3);
  check_even("flux_pack", h, w);
  return latents.contiguous()
      .reshape({b, c, h / 2, 2, w / 2, 2})
      .permute({0, 2, 4, 1, 3, 5})
      .reshape({b, (h / 2) * (w / 2), c * 4});
}

Tensor flux_unpack(const Tensor& packed, int64_t height, int64_t width) {
  check_even("flux_unpack", height, width);
  CPDIT_CHECK(packed.dim() == 3 && packed.size(1) == (height / 2) * (width / 2) && packed.size(2) % 4 == 0,
              invalid_argument, "flux_unpack: packed latents ", packed.describe(), " do not fit a ",
              height, " x ", width, " latent (expected (B, ", (height / 2) * (width / 2), ", 4C))");
  const int64_t b = packed.size(0), c = packed.size(2) / 4;
  return packed.contiguous()
      .reshape({b, height / 2, width / 2, c, 2, 2})
      .permute({0, 3, 1, 4, 2, 5})
      .reshape({b, c, height, width});
}

Tensor flux_packed_noise(const FluxLatentShape& shape, uint64_t seed, int64_t token_begin,
                         int64_t token_count) {
  check_even("flux_packed_noise", shape.height, shape.width);
  CPDIT_CHECK(token_begin >= 0 && token_count >= 0 && token_begin + token_count <= shape.tokens(),
              invalid_argument, "flux_packed_noise: tokens [", token_begin, ", ",
              token_begin + token_count, ") are outside the ", shape.tokens(), " tokens of the image");
  const int64_t channels = shape.channels, h = shape.height, w = shape.width, grid_w = w / 2;
  Tensor out = Tensor::empty({shape.batch, token_count, channels * 4}, DType::f32);
  float* dst = out.data<float>();
  for (int64_t b = 0; b < shape.batch; ++b) {
    for (int64_t t = token_begin; t < token_begin + token_count; ++t) {
      const int64_t row = t / grid_w, col = t % grid_w;
      for (int64_t c = 0; c < channels; ++c) {
        for (int64_t dy = 0; dy < 2; ++dy) {
          // The two dx neighbours are adjacent in (B, C, h, w) order, and in the token.
          const int64_t unpacked = ((b * channels + c) * h + 2 * row + dy) * w + 2 * col;
          fill_normal(seed, uint64_t(unpacked), dst, 2);
          dst += 2;
        }
      }
    }
  }
  return out;
}

Tensor flux_image_ids(int64_t packed_height, int64_t packed_width) {
  CPDIT_CHECK(packed_height > 0 && packed_width > 0, invalid_argument, "flux_image_ids: grid ",
              packed_height, " x ", packed_width, " must be positive");
  Tensor ids = Tensor::zeros({packed_height * packed_width, 3}, DType::f32);
  float* p = ids.data<float>();
  for (int64_t i = 0; i < packed_height; ++i) {
    for (int64_t j = 0; j < packed_width; ++j, p += 3) {
      p[1] = float(i);
      p[2] = float(j);
    }
  }
  return ids;
}

Tensor flux_text_ids(int64_t text_length) {
  CPDIT_CHECK(text_length >= 0, invalid_argument, "flux_text_ids: negative length ", text_length);
  return Tensor::zeros({text_length, 3}, DType::f32);
}

}  // namespace cpdit::pipeline
