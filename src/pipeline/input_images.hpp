#pragma once
// What a generation makes of its input images before the ranks start (image-to-image, image-to-video):
// each picture through the pipeline's VAE (and CLIP) as the diffusers pipeline makes it, every model loaded
// and freed here, on this thread with the run's compute threads; under mpirun on world rank 0 alone, the
// other processes receiving the tensors (pipeline::made_on_rank0).
#include <cpdit/comm/communicator.hpp>
#include <cpdit/models/wan/model.hpp>
#include <cpdit/pipeline/image_start.hpp>
#include <cpdit/pipeline/request.hpp>
#include <cpdit/pipeline/stages.hpp>
#include <cpdit/pipeline/wan_image.hpp>

#include <memory>

namespace cpdit::pipeline {

// The processes of an mpirun launch, or null.
std::shared_ptr<comm::Communicator> launched_processes();

// `model` in each: the --model path or "preset NAME", for errors.
// SkyReels-V2 image-to-video by diffusion forcing: the --first-image (and --last-image) pictures at the
// video's size through the pipeline's Wan VAE, as its prepare_latents makes them (`first`, `last`);
// none without --first-image.
nn::TensorMap skyreels_image_latents(const Request& r, const PipelineParts& parts, const std::string& model);

// Image-to-video by conditioning (Wan 2.1 / 2.2, SkyReels-V2): the --first-image (and --last-image) pictures
// as WanImageToVideoPipeline conditions on them: at the video's size through the pipeline's Wan VAE
// beside the frame mask (`temporal` frames per latent frame), and, for a model with image_dim, as its
// CLIPImageProcessor makes them through its image encoder.
WanImageConditioning wan_image_conditioning(const Request& r, const PipelineParts& parts, const std::string& model,
                                            const models::wan::WanConfig& config, int64_t temporal);

// Image-to-image (FLUX.1, Qwen-Image): --init-image at the run's size through the pipeline's VAE (to
// `latent_channels`, `vae_scale_factor` pixels per latent), its posterior sampled with noise of a stream of
// --seed's own, as the pipelines' _encode_vae_image; --strength, default 0.6.
ImageStart image_start(const Request& r, const PipelineParts& parts, const std::string& model, int64_t latent_channels,
                       int64_t vae_scale_factor);

}  // namespace cpdit::pipeline
