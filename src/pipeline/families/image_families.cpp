#include "pipeline/families/image_families.hpp"
#include "pipeline/input_images.hpp"
#include "pipeline/memory_check.hpp"

#include <cpdit/pipeline/latents.hpp>

namespace cpdit::pipeline {

ImageStart init_image_start(const LoopInputs& in, int64_t latent_channels) {
  if (in.request.init_image.empty()) return {};
  return image_start(in.request, in.parts, in.model, latent_channels, in.transformer.vae_scale_factor);
}

void check_image_fits(const Request& r, const Transformer& t, int64_t hidden) {
  const FluxLatentShape latent = flux_latent_shape(r.height, r.width, 16, 1, t.vae_scale_factor);
  check_generate_fits(double(shape_numel(latent.unpacked())), double(latent.tokens() + r.text_tokens), double(hidden));
}

}  // namespace cpdit::pipeline
