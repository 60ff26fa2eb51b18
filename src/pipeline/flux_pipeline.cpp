#include "pipeline/text_tensors.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/nn/step_cache.hpp>
#include <cpdit/parallel/shard.hpp>
#include <cpdit/pipeline/flux_pipeline.hpp>
#include <cpdit/pipeline/guidance.hpp>
#include <cpdit/pipeline/latents.hpp>
#include <cpdit/pipeline/random.hpp>
#include <cpdit/pipeline/step_loop.hpp>

#include <chrono>

namespace cpdit::pipeline {

using models::flux::FluxConfig;

namespace {
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

FluxConditioning flux_conditioning(const nn::TensorMap& tensors, const std::string& source, const FluxConfig& config) {
  for (const char* name : {"prompt_embeds", "pooled_prompt_embeds"})
    CPDIT_CHECK(tensors.count(name), invalid_argument, source, " has no tensor '", name,
                "' (a FLUX.1 text-encoder stage writes prompt_embeds (B, L, ", config.joint_attention_dim,
                ") and pooled_prompt_embeds (B, ", config.pooled_projection_dim, "))");
  FluxConditioning c;
  c.prompt_embeds = tensors.at("prompt_embeds").to(DType::f32);
  c.pooled_prompt_embeds = tensors.at("pooled_prompt_embeds").to(DType::f32);
  const Tensor& p = c.prompt_embeds;
  const Tensor& q = c.pooled_prompt_embeds;
  CPDIT_CHECK(p.dim() == 3 && p.size(2) == config.joint_attention_dim && p.size(1) > 0, invalid_argument, source,
              ": prompt_embeds is ", p.describe(), ", the model needs (B, L, ", config.joint_attention_dim, ")");
  CPDIT_CHECK(q.dim() == 2 && q.size(0) == p.size(0) && q.size(1) == config.pooled_projection_dim,
              invalid_argument, source, ": pooled_prompt_embeds is ", q.describe(), ", the model needs (",
              p.size(0), ", ", config.pooled_projection_dim, ")");
  if (tensors.count("negative_prompt_embeds") && tensors.count("negative_pooled_prompt_embeds")) {
    c.negative_prompt_embeds = tensors.at("negative_prompt_embeds").to(DType::f32);
    c.negative_pooled_prompt_embeds = tensors.at("negative_pooled_prompt_embeds").to(DType::f32);
    CPDIT_CHECK(c.negative_prompt_embeds.shape() == p.shape() && c.negative_pooled_prompt_embeds.shape() == q.shape(),
                invalid_argument, source, ": the negative pair ", c.negative_prompt_embeds.describe(), ", ",
                c.negative_pooled_prompt_embeds.describe(), " must have the shapes of prompt_embeds ", p.describe(),
                " and pooled_prompt_embeds ", q.describe());
  }
  return c;
}

FluxConditioning random_flux_conditioning(const FluxConfig& config, int64_t batch, int64_t text_tokens,
                                          uint64_t seed) {
  // T5-XXL outputs are of order 0.1-0.3; CLIP pooled outputs of order 1.
  FluxConditioning c;
  c.prompt_embeds = random_text_embeds(batch, text_tokens, config.joint_attention_dim, seed ^ 0x7e47ull, 0.2f);
  c.pooled_prompt_embeds = randn({batch, config.pooled_projection_dim}, seed ^ 0xc11dull);
  return c;
}

parallel::ContextParallelPlan flux_sharded_latents_plan() {
  parallel::ContextParallelPlan plan = models::flux::flux_plan();
  plan[""].inputs.erase("hidden_states");
  plan[""].inputs.erase("img_ids");
  plan.erase("proj_out");
  return plan;
}

FluxGenerateResult generate_flux(const nn::Model& model, const FluxConfig& config, Scheduler& scheduler,
                                 const FluxConditioning& conditioning, const FluxGenerateOptions& options,
                                 comm::Communicator* group) {
  CPDIT_CHECK(options.steps >= 1, invalid_argument, "steps must be at least 1, got ", options.steps);
  CPDIT_CHECK(
      config.patch_size == 1 && config.in_channels % 4 == 0, invalid_argument,
      "the FLUX.1 pipeline packs 2x2 latent patches into in_channels = 4 * latent channels; this model has patch_size ",
      config.patch_size, " and in_channels ", config.in_channels);
  const int64_t batch = conditioning.prompt_embeds.size(0);
  FluxLatentShape shape =
      flux_latent_shape(options.height, options.width, config.in_channels / 4, batch, options.vae_scale_factor);

  // This rank's image tokens, by the same tensor_split rule the plan uses for the text.
  const int ranks = group ? group->size() : 1;
  const int rank = group ? group->rank() : 0;
  const int64_t tokens = shape.tokens();
  const int64_t begin = split_offset(tokens, ranks, rank);
  const int64_t count = split_sizes(tokens, ranks)[size_t(rank)];

  scheduler.schedule(options.steps, tokens);
  const bool from_image = options.image.image_latents.defined();
  const int first = from_image ? skipped_steps(options.steps, options.image.strength) : 0;
  Tensor latents;
  if (options.initial_latents.defined()) {
    const Tensor& given = options.initial_latents;
    CPDIT_CHECK(given.shape() == shape.packed(), invalid_argument, "the initial latents are ", given.describe(),
                "; a ", options.height, "x", options.width, " image on this model needs them packed as ",
                shape_string(shape.packed()));
    latents = given.to(DType::f32).narrow(1, begin, count).contiguous();
  } else {
    latents = flux_packed_noise(shape, options.seed, begin, count);
    if (from_image)
      latents = noised_image_tokens(options.image, shape, latents, begin, scheduler.sigma(first));
  }
  Tensor img_ids = flux_image_ids(shape.height / 2, shape.width / 2).narrow(0, begin, count).contiguous();
  Tensor txt_ids = flux_text_ids(conditioning.prompt_embeds.size(1));
  const bool guided = conditioning.negative_prompt_embeds.defined() && options.true_cfg_scale > 1.0f;

  FluxGenerateResult result;
  run_steps(first, options.steps, [&](int i) {
    // diffusers passes t / 1000 (float32) and the guidance scale as given; the model rescales both.
    Tensor timestep = Tensor::full({batch}, double(float(scheduler.timestep(i)) / 1000.0f));
    nn::TensorMap inputs{{"hidden_states", latents},
                         {"encoder_hidden_states", conditioning.prompt_embeds},
                         {"pooled_projections", conditioning.pooled_prompt_embeds},
                         {"timestep", timestep},
                         {"img_ids", img_ids},
                         {"txt_ids", txt_ids}};
    if (config.guidance_embeds) inputs["guidance"] = Tensor::full({batch}, double(options.guidance));
    Tensor velocity = model.forward(inputs).at("sample");
    if (guided) {
      inputs["encoder_hidden_states"] = conditioning.negative_prompt_embeds;
      inputs["pooled_projections"] = conditioning.negative_pooled_prompt_embeds;
      const nn::ScopedCacheBranch negative(1);  // a step cache keeps this pass apart, as diffusers' "uncond"
      velocity = combine_guidance(velocity, model.forward(inputs).at("sample"), {options.true_cfg_scale});
    }
    // The ancestral step's noise: this rank's shard of noise drawn for the whole latents, as the initial noise.
    const Tensor noise =
        scheduler.stochastic() ? flux_packed_noise(shape, step_noise_seed(options.seed, i), begin, count) : Tensor();
    latents = scheduler.step(velocity, i, latents, noise);
  }, options.on_step, options.steps - first, result.step_seconds,
     {&latents, 1, group, [&](int i) { return scheduler.timestep(i); }});

  auto start = std::chrono::steady_clock::now();
  Tensor packed = ranks > 1 ? parallel::gather(latents, 1, *group) : latents;
  result.gather_seconds = seconds_since(start);
  result.gather_bytes = int64_t(packed.nbytes());
  result.latents = flux_unpack(packed, shape.height, shape.width);
  return result;
}

}  // namespace cpdit::pipeline
