#include "pipeline/text_tensors.hpp"
#include "pipeline/video_latents.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/pipeline/guidance.hpp>
#include <cpdit/pipeline/latents.hpp>
#include <cpdit/pipeline/random.hpp>
#include <cpdit/pipeline/wan_pipeline.hpp>
#include <cpdit/pipeline/step_loop.hpp>


namespace cpdit::pipeline {

using models::wan::WanConfig;

WanVaeFactors WanVaeFactors::from_json(const nlohmann::json& j) {
  WanVaeFactors f;
  if (j.contains("scale_factor_spatial") && !j["scale_factor_spatial"].is_null()) f.spatial = j["scale_factor_spatial"].get<int64_t>();
  if (j.contains("scale_factor_temporal") && !j["scale_factor_temporal"].is_null())
    f.temporal = j["scale_factor_temporal"].get<int64_t>();
  CPDIT_CHECK(f.spatial >= 1 && f.temporal >= 1, invalid_argument, "the VAE's scale_factor_spatial ", f.spatial,
              " and scale_factor_temporal ", f.temporal, " must be positive");
  return f;
}

Tensor wan_prompt_embeds(const nn::TensorMap& tensors, const std::string& source, const WanConfig& config,
                         const std::string& name) {
  const auto it = tensors.find(name);
  CPDIT_CHECK(it != tensors.end(), invalid_argument, source, " has no tensor '", name,
              "' (a Wan text-encoder stage writes (B, L, ", config.text_dim, "))");
  Tensor p = it->second.to(DType::f32);
  CPDIT_CHECK(p.dim() == 3 && p.size(2) == config.text_dim && p.size(1) > 0, invalid_argument, source, ": ", name,
              " is ", p.describe(), ", the model needs (B, L, ", config.text_dim, ")");
  return p;
}

Tensor random_wan_prompt_embeds(const WanConfig& config, int64_t batch, int64_t text_tokens, uint64_t seed) {
  return random_text_embeds(batch, text_tokens, config.text_dim, seed ^ 0x57a7ull, 0.2f);  // UMT5 outputs: 0.1-0.3
}

Shape wan_latent_shape(const WanConfig& config, int64_t batch, int64_t frames, int64_t height, int64_t width,
                       const WanVaeFactors& vae) {
  // An image-to-video model's input adds the image condition's channels to the latents'.
  const int64_t channels = wan_takes_image(config) ? config.out_channels : config.in_channels;
  return video_latent_shape(batch, channels, frames, height, width, vae.temporal, vae.spatial,
                            vae.spatial * config.patch_size[1]);
}

bool wan_runs_guidance(const Tensor& negative_prompt_embeds, float guidance_scale) {
  return negative_prompt_embeds.defined() && guidance_scale > 1.0f;
}

Tensor initial_wan_latents(const Shape& shape, const WanGenerateOptions& options) {
  if (!options.initial_latents.defined()) return randn(shape, options.seed);
  CPDIT_CHECK(options.initial_latents.shape() == shape, invalid_argument, "the initial latents are ",
              options.initial_latents.describe(), "; ", options.frames, " frames of ", options.height, "x",
              options.width, " on this model need ", shape_string(shape));
  return options.initial_latents.to(DType::f32).contiguous();
}

Tensor guided_prediction(const nn::Model& model, nn::TensorMap inputs, const Tensor& prompt_embeds,
                         const WanGenerateOptions& options, std::optional<float> scale) {
  const Tensor& negative = options.negative_prompt_embeds;
  CPDIT_CHECK(!negative.defined() || negative.size(0) == prompt_embeds.size(0), invalid_argument,
              "negative_prompt_embeds has batch ", negative.size(0), ", prompt_embeds ", prompt_embeds.size(0));
  const bool guided = wan_runs_guidance(negative, options.guidance_scale);
  CPDIT_CHECK(guided || options.cfg == nullptr || options.cfg->size() == 1, invalid_argument,
              "CFG-parallel Wan needs classifier-free guidance: negative_prompt_embeds and guidance_scale > 1");
  auto predict = [&](const Tensor& text) {
    inputs["encoder_hidden_states"] = text;
    return model.forward(inputs).at("sample");
  };
  if (!guided) return predict(prompt_embeds);
  const GuidancePair pair =
      predict_cond_uncond([&] { return predict(prompt_embeds); }, [&] { return predict(negative); }, options.cfg);
  return combine_guidance(pair.cond, pair.uncond, {scale.value_or(options.guidance_scale)});
}

namespace {

// The inputs an image-to-video model takes besides the latents: the condition (checked against the
// latents of `shape`) and the image tokens, over `batch`; none for a text-to-video model.
nn::TensorMap image_inputs(const WanConfig& config, const Shape& shape, const WanImageConditioning& image) {
  const bool takes = wan_takes_image(config);
  CPDIT_CHECK(takes == image.condition.defined(), invalid_argument,
              takes ? "this Wan image-to-video model (in_channels " + std::to_string(config.in_channels) +
                          ") needs an image to start from"
                    : std::string("this Wan model makes video from text alone; it takes no image"));
  if (!takes) return {};
  const Tensor& c = image.condition;
  CPDIT_CHECK(c.dim() == 5 && c.size(0) == 1 && c.size(1) == config.in_channels - config.out_channels &&
                  c.size(2) == shape[2] && c.size(3) == shape[3] && c.size(4) == shape[4],
              invalid_argument, "the image condition is ", c.describe(), "; this model and clip need (1, ",
              config.in_channels - config.out_channels, ", ", shape[2], ", ", shape[3], ", ", shape[4], ")");
  CPDIT_CHECK((config.image_dim > 0) == image.image_embeds.defined(), invalid_argument,
              config.image_dim > 0 ? "this Wan image-to-video model (image_dim set) needs the image encoder's tokens"
                                   : "this Wan model (image_dim null) takes no image tokens");
  nn::TensorMap inputs{{"condition", repeated_over_batch(c.to(DType::f32), shape[0])}};
  if (image.image_embeds.defined()) inputs["encoder_hidden_states_image"] = repeated_over_batch(image.image_embeds, shape[0]);
  return inputs;
}

}  // namespace

WanGenerateResult generate_wan(const nn::Model& model, const models::wan::WanConfig& config,
                               Scheduler& scheduler, const Tensor& prompt_embeds,
                               const WanGenerateOptions& options) {
  CPDIT_CHECK(options.steps >= 1, invalid_argument, "steps must be at least 1, got ", options.steps);
  const int64_t batch = prompt_embeds.size(0);
  const Shape shape = wan_latent_shape(config, batch, options.frames, options.height, options.width, options.vae);
  Tensor latents = initial_wan_latents(shape, options);
  const nn::TensorMap image = image_inputs(config, shape, options.image);
  scheduler.schedule(options.steps, 0);
  WanGenerateResult result;
  run_steps(0, options.steps, [&](int i) {
    // WanPipeline feeds the integer timestep, expanded over the batch, unscaled.
    const Tensor timestep = Tensor::full({batch}, scheduler.timestep(i));
    const Tensor hidden = image.count("condition") ? cat({latents, image.at("condition")}, 1) : latents;
    nn::TensorMap inputs{{"hidden_states", hidden}, {"timestep", timestep}};
    if (image.count("encoder_hidden_states_image"))
      inputs["encoder_hidden_states_image"] = image.at("encoder_hidden_states_image");
    // Wan 2.2 A14B: the timesteps below the boundary go to the low-noise expert at its own scale.
    const WanGenerateOptions::LowNoiseExpert& expert = options.low_noise;
    const bool low_noise = expert.model != nullptr && scheduler.timestep(i) < expert.boundary_timestep;
    const Tensor velocity =
        low_noise ? guided_prediction(*expert.model, inputs, prompt_embeds, options, expert.guidance_scale)
                  : guided_prediction(model, inputs, prompt_embeds, options);
    latents = scheduler.step(velocity, i, latents, Tensor());
  }, options.on_step, options.steps, result.step_seconds,
     {&latents, -1, nullptr, [&](int i) { return scheduler.timestep(i); }});
  result.latents = latents;
  return result;
}

}  // namespace cpdit::pipeline
