#include "pipeline/text_tensors.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/pipeline/guidance.hpp>
#include <cpdit/pipeline/latents.hpp>
#include <cpdit/pipeline/qwenimage_pipeline.hpp>
#include <cpdit/pipeline/step_loop.hpp>

#include <nlohmann/json.hpp>


namespace cpdit::pipeline {

using models::qwenimage::QwenImageConfig;

namespace {

// QwenImagePipeline.encode_prompt drops a mask whose every token is real.
Tensor unless_all_real(const Tensor& mask) {
  if (!mask.defined()) return mask;
  const int64_t* v = mask.data<int64_t>();
  for (int64_t i = 0; i < mask.numel(); ++i)
    if (v[i] == 0) return mask;
  return {};
}

}  // namespace

QwenImageConditioning qwenimage_conditioning(const nn::TensorMap& tensors, const std::string& path,
                                             const QwenImageConfig& config) {
  const TextConditioning t = read_text_conditioning(tensors, path, config.joint_attention_dim, "prompt_embeds_mask",
                                                    "a Qwen-Image text stage");
  return {t.embeds, t.mask, t.negative_embeds, t.negative_mask};
}

Tensor qwenimage_image_pixels(const Tensor& frame_pixels) {
  CPDIT_CHECK(frame_pixels.defined() && frame_pixels.dim() == 5 && frame_pixels.size(1) == 1, invalid_argument,
              "Qwen-Image's VAE decodes one frame (B, 1, H, W, 3), got ",
              frame_pixels.defined() ? frame_pixels.describe() : "undefined");
  return frame_pixels.select(1, 0).contiguous();
}

QwenImageConditioning random_qwenimage_conditioning(const QwenImageConfig& config, int64_t batch,
                                                    int64_t text_tokens, uint64_t seed) {
  // Qwen2.5-VL's last hidden states are of order 1-3.
  QwenImageConditioning c;
  c.prompt_embeds = random_text_embeds(batch, text_tokens, config.joint_attention_dim, seed ^ 0x9e17ull, 2.0f);
  c.negative_prompt_embeds = random_text_embeds(batch, text_tokens, config.joint_attention_dim, seed ^ 0x4e6aull, 2.0f);
  return c;
}

int64_t qwenimage_vae_scale_factor(const nlohmann::json& vae_config, const std::string& source) {
  CPDIT_CHECK(vae_config.contains("temperal_downsample") && vae_config["temperal_downsample"].is_array() &&
                  vae_config["temperal_downsample"].size() < 16,
              invalid_argument, source, ": the Qwen-Image VAE config needs temperal_downsample (a short list)");
  return int64_t(1) << vae_config["temperal_downsample"].size();
}

bool qwenimage_runs_true_cfg(const QwenImageConditioning& conditioning, float true_cfg_scale) {
  return conditioning.negative_prompt_embeds.defined() && true_cfg_scale > 1.0f;
}

QwenImageGenerateResult generate_qwenimage(const nn::Model& model, const QwenImageConfig& config,
                                           Scheduler& scheduler, const QwenImageConditioning& c,
                                           const QwenImageGenerateOptions& options) {
  CPDIT_CHECK(options.steps >= 1, invalid_argument, "steps must be at least 1, got ", options.steps);
  CPDIT_CHECK(config.patch_size == 2 && config.in_channels % 4 == 0, invalid_argument,
              "the Qwen-Image pipeline packs 2x2 latent patches into in_channels = 4 * latent channels; this model "
              "has patch_size ", config.patch_size, " and in_channels ", config.in_channels);
  const int64_t batch = c.prompt_embeds.size(0);
  const FluxLatentShape shape =
      flux_latent_shape(options.height, options.width, config.in_channels / 4, batch, options.vae_scale_factor);
  scheduler.schedule(options.steps, shape.tokens());
  const bool from_image = options.image.image_latents.defined();
  const int first = from_image ? skipped_steps(options.steps, options.image.strength) : 0;
  Tensor latents;
  if (options.initial_latents.defined()) {
    CPDIT_CHECK(options.initial_latents.shape() == shape.packed(), invalid_argument, "the initial latents are ",
                options.initial_latents.describe(), "; a ", options.height, "x", options.width,
                " image on this model needs them packed as ", shape_string(shape.packed()));
    latents = options.initial_latents.to(DType::f32).contiguous();
  } else {
    latents = flux_packed_noise(shape, options.seed, 0, shape.tokens());
    if (from_image)
      latents = noised_image_tokens(options.image, shape, latents, 0, scheduler.sigma(first));
  }
  const bool guided = qwenimage_runs_true_cfg(c, options.true_cfg_scale);
  CPDIT_CHECK(guided || options.cfg == nullptr || options.cfg->size() == 1, invalid_argument,
              "CFG-parallel Qwen-Image needs true CFG: negative_prompt_embeds and true_cfg_scale > 1");
  // One image segment of (1 frame, h/2, w/2) tokens per batch item.
  Tensor img_shapes = Tensor::empty({batch, 1, 3}, DType::i64);
  for (int64_t b = 0; b < batch; ++b) {
    int64_t* s = img_shapes.data<int64_t>() + 3 * b;
    s[0] = 1, s[1] = shape.height / 2, s[2] = shape.width / 2;
  }
  const Tensor mask = unless_all_real(c.prompt_embeds_mask);
  const Tensor negative_mask = unless_all_real(c.negative_prompt_embeds_mask);

  QwenImageGenerateResult result;
  run_steps(first, options.steps, [&](int i) {
    // The pipeline passes t / 1000 in float32; the model's sinusoid scales it back.
    const Tensor timestep = Tensor::full({batch}, double(float(scheduler.timestep(i)) / 1000.0f));
    auto predict = [&](const Tensor& text, const Tensor& text_mask) {
      nn::TensorMap inputs{{"hidden_states", latents}, {"encoder_hidden_states", text},
                           {"timestep", timestep}, {"img_shapes", img_shapes}};
      if (text_mask.defined()) inputs["encoder_hidden_states_mask"] = text_mask;
      return model.forward(inputs).at("sample");
    };
    Tensor velocity;
    if (guided) {
      const GuidancePair pair = predict_cond_uncond([&] { return predict(c.prompt_embeds, mask); },
                                                    [&] { return predict(c.negative_prompt_embeds, negative_mask); },
                                                    options.cfg);
      velocity = combine_guidance(pair.cond, pair.uncond, {options.true_cfg_scale, /*rescale_to_cond_norm=*/true});
    } else {
      velocity = predict(c.prompt_embeds, mask);
    }
    const Tensor noise =
        scheduler.stochastic() ? flux_packed_noise(shape, step_noise_seed(options.seed, i), 0, shape.tokens()) : Tensor();
    latents = scheduler.step(velocity, i, latents, noise);
  }, options.on_step, options.steps - first, result.step_seconds,
     {&latents, -1, nullptr, [&](int i) { return scheduler.timestep(i); }});
  const Tensor unpacked = flux_unpack(latents, shape.height, shape.width);
  result.latents = unpacked.reshape({batch, shape.channels, 1, shape.height, shape.width});
  return result;
}

}  // namespace cpdit::pipeline
