#include "pipeline/input_images.hpp"

#include <cpdit/comm/launch.hpp>
#include <cpdit/comm/mpi.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/core/threads.hpp>
#include <cpdit/pipeline/clip_image.hpp>
#include <cpdit/pipeline/random.hpp>
#include <cpdit/pipeline/skyreels_image.hpp>

#include <functional>

namespace cpdit::pipeline {

std::shared_ptr<comm::Communicator> launched_processes() {
  return comm::launched_by_mpi() ? comm::mpi_world() : nullptr;
}

namespace {

// `make` (an image encode) on this thread with the run's compute threads, before the ranks start; under
// mpirun on world rank 0 alone, every other process receiving its tensors (made_on_rank0).
nn::TensorMap encoded_images(const Request& r, const std::function<nn::TensorMap()>& make) {
  const ScopedComputeThreads budget(r.parallel.threads > 0 ? r.parallel.threads : hardware_threads());
  return made_on_rank0(make, launched_processes().get());
}

}  // namespace

nn::TensorMap skyreels_image_latents(const Request& args, const PipelineParts& parts, const std::string& model) {
  if (args.first_image.empty()) return {};
  return encoded_images(args, [&] {
    const Tensor first = image_pixels(args.first_image, args.height, args.width);
    const Tensor last =
        args.last_image.empty() ? Tensor() : image_pixels(args.last_image, args.height, args.width);
    CPDIT_CHECK(parts.vae, invalid_argument, "--first-image needs the pipeline's VAE to encode it: ", model,
                " has no vae/ (give a diffusers pipeline folder)");
    const models::LoadedModel vae = parts.vae();
    nn::TensorMap inputs{{"first", image_latents(vae, first)}};
    if (last.defined()) inputs["last"] = image_latents(vae, last);
    return inputs;
  });
}

ImageStart image_start(const Request& args, const PipelineParts& parts, const std::string& model, int64_t latent_channels,
                       int64_t vae_scale_factor) {
  const nn::TensorMap made = encoded_images(args, [&] {
    CPDIT_CHECK(parts.vae, invalid_argument, "--init-image needs the pipeline's VAE to encode it: ", model,
                " has no vae/ (give a diffusers pipeline folder or a preset)");
    const int64_t f = vae_scale_factor;
    const Tensor noise = randn({1, latent_channels, args.height / f, args.width / f}, args.seed ^ 0x1a7e5ull);
    const Tensor pixels = image_pixels(args.init_image, args.height, args.width);
    return nn::TensorMap{{"image_latents", image_start_latents(parts.vae(), pixels, noise)}};
  });
  return {made.at("image_latents"), args.strength.value_or(0.6)};  // both pipelines' default strength
}

WanImageConditioning wan_image_conditioning(const Request& args, const PipelineParts& parts, const std::string& model,
                                            const models::wan::WanConfig& config, int64_t temporal) {
  const nn::TensorMap made = encoded_images(args, [&] {
    CPDIT_CHECK(parts.vae, invalid_argument, "--first-image needs the pipeline's VAE to encode it: ", model,
                " has no vae/ (give a diffusers pipeline folder)");
    const Tensor first = image_pixels(args.first_image, args.height, args.width);
    const Tensor last =
        args.last_image.empty() ? Tensor() : image_pixels(args.last_image, args.height, args.width);
    nn::TensorMap image{
        {"condition", wan_image_condition(parts.vae(), first, last, args.frames, temporal)}};
    if (config.image_dim == 0) return image;
    CPDIT_CHECK(parts.image_encoder && !parts.image_processor.empty(), invalid_argument, model,
                " has no image_encoder/ and image_processor/: this model (image_dim ", config.image_dim,
                ") conditions on CLIP's tokens of its images");
    const auto processing = ClipImageProcessing::from_file(parts.image_processor);
    Tensor pixels = clip_image_pixels(args.first_image, processing);
    if (last.defined()) pixels = cat({pixels, clip_image_pixels(args.last_image, processing)}, 0);
    image["image_embeds"] = wan_image_embeds(parts.image_encoder(), pixels);
    return image;
  });
  const auto embeds = made.find("image_embeds");
  return {made.at("condition"), embeds == made.end() ? Tensor() : embeds->second};
}

}  // namespace cpdit::pipeline
