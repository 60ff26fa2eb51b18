#pragma once
// The FLUX.1 denoising loop (what diffusers' FluxPipeline does between the text encoders and the
// VAE): seeded noise, packed latents and position ids, the flow-match schedule, and one transformer
// call plus one Euler step per timestep.
//
// Under context parallelism the image tokens stay split across ranks for the whole loop: each rank
// makes only its own shard of the noise, the model runs with a plan that neither splits the latents
// nor gathers its output, the Euler step is token-wise, and the latents are gathered once, at the end
// (diffusers gathers the model output at every step).
#include <cpdit/comm/communicator.hpp>
#include <cpdit/models/flux/model.hpp>
#include <cpdit/pipeline/flow_match_euler.hpp>
#include <cpdit/pipeline/image_start.hpp>
#include <cpdit/pipeline/step_loop.hpp>

#include <functional>
#include <string>
#include <vector>

namespace cpdit::pipeline {

// What a FLUX.1 text-encoder stage produces: T5 prompt_embeds (B, L, joint_attention_dim) and CLIP
// pooled_prompt_embeds (B, pooled_projection_dim); for true CFG also the negative prompt's pair, of
// the same shapes (FluxPipeline requires that), else undefined.
struct FluxConditioning {
  Tensor prompt_embeds;
  Tensor pooled_prompt_embeds;
  Tensor negative_prompt_embeds;
  Tensor negative_pooled_prompt_embeds;
};

// `prompt_embeds` and `pooled_prompt_embeds` of the encode stage's output or an --embeddings file
// (`source` names it in errors), checked against the model, and the negative pair
// (`negative_prompt_embeds`, `negative_pooled_prompt_embeds`) when the tensors hold both.
FluxConditioning flux_conditioning(const nn::TensorMap& tensors, const std::string& source,
                                   const models::flux::FluxConfig& config);
// Deterministic stand-in embeddings for demos and benchmarks (no text encoder): N(0, 1) scaled to
// the magnitude of real T5 / CLIP outputs.
FluxConditioning random_flux_conditioning(const models::flux::FluxConfig& config, int64_t batch,
                                          int64_t text_tokens, uint64_t seed);

struct FluxGenerateOptions {
  int steps = 4;
  int64_t height = 256, width = 256;  // pixels, multiples of 16
  uint64_t seed = 0;
  float guidance = 3.5f;  // used when the model has a guidance embedder (FLUX.1-dev), else ignored
  // FluxPipeline's true_cfg_scale: with the negative pair and a scale > 1, a second transformer call
  // per step on the negative prompt, combined as uncond + scale·(cond − uncond) (no norm rescale).
  float true_cfg_scale = 1.0f;
  int64_t vae_scale_factor = 8;  // 2^(len(block_out_channels) - 1) of the pipeline's VAE
  // The initial noise in the pipeline's packed layout (B, tokens, in_channels), as diffusers'
  // `latents=` argument; undefined: seeded noise. Every rank passes the whole tensor and keeps its shard.
  // From an image, given latents are the loop's start as they are (FluxImg2ImgPipeline does not noise them).
  Tensor initial_latents;
  // Image-to-image (FluxImg2ImgPipeline) when image.image_latents is defined: the schedule's first
  // skipped_steps(steps, strength) steps skipped, and the loop started from the image's latents
  // noised to the first step kept (noised_image_latents, with the seeded noise).
  ImageStart image;
  StepHook on_step;  // after each step, on every rank (step_loop.hpp)
};

struct FluxGenerateResult {
  Tensor latents;  // (B, C, H/8, W/8), unpacked, identical on every rank
  std::vector<double> step_seconds;
  double gather_seconds = 0;  // the one gather of the latents at the end
  int64_t gather_bytes = 0;   // bytes of the full packed latents that gather assembles
};

// flux_plan() without the image-token entries: hidden_states and img_ids arrive already split and
// the output is not gathered, so latents stay sharded from step to step. Text is still split by the
// plan at the model's input.
parallel::ContextParallelPlan flux_sharded_latents_plan();

// Collective over `group` (every rank of the model's context-parallel group calls it; nullptr or a
// group of one runs unsplit). When the group has more than one rank, `model` must have parallelism
// enabled over it with flux_sharded_latents_plan(). `model` is a FluxTransformer2DModel of `config`.
FluxGenerateResult generate_flux(const nn::Model& model, const models::flux::FluxConfig& config,
                                 Scheduler& scheduler, const FluxConditioning& conditioning,
                                 const FluxGenerateOptions& options, comm::Communicator* group);

}  // namespace cpdit::pipeline
