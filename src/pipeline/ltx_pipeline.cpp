#include "pipeline/text_tensors.hpp"
#include "pipeline/video_latents.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/pipeline/guidance.hpp>
#include <cpdit/pipeline/ltx_pipeline.hpp>
#include <cpdit/pipeline/random.hpp>
#include <cpdit/pipeline/step_loop.hpp>

#include <nlohmann/json.hpp>

#include <cmath>

namespace cpdit::pipeline {

using models::ltx_video::LtxVideoConfig;

namespace {

int64_t positive_field(const nlohmann::json& j, const char* name, int64_t fallback) {
  if (!j.contains(name) || j[name].is_null()) return fallback;
  CPDIT_CHECK(j[name].is_number_integer() && j[name].get<int64_t>() >= 1 && j[name].get<int64_t>() <= 1024,
              invalid_argument, "the LTX-Video VAE config's ", name, " must be an integer from 1 to 1024");
  return j[name].get<int64_t>();
}

}  // namespace

LtxVaeFactors LtxVaeFactors::from_json(const nlohmann::json& j) {
  // diffusers' AutoencoderKLLTXVideo: the ratios when the config names them, else from the encoder's levels.
  int64_t levels = 3;  // spatio_temporal_scaling's default (True, True, True, False)
  if (j.contains("spatio_temporal_scaling") && j["spatio_temporal_scaling"].is_array()) {
    CPDIT_CHECK(j["spatio_temporal_scaling"].size() <= 16, invalid_argument,
                "the LTX-Video VAE config's spatio_temporal_scaling has more than 16 levels");
    levels = 0;
    for (const nlohmann::json& v : j["spatio_temporal_scaling"]) {
      CPDIT_CHECK(v.is_boolean(), invalid_argument,
                  "the LTX-Video VAE config's spatio_temporal_scaling must be booleans");
      levels += v.get<bool>() ? 1 : 0;
    }
  }
  LtxVaeFactors f;
  f.spatial = positive_field(j, "spatial_compression_ratio", positive_field(j, "patch_size", 4) << levels);
  f.temporal = positive_field(j, "temporal_compression_ratio", positive_field(j, "patch_size_t", 1) << levels);
  return f;
}

LtxConditioning ltx_conditioning(const nn::TensorMap& tensors, const std::string& source,
                                 const LtxVideoConfig& config) {
  const TextConditioning t = read_text_conditioning(tensors, source, config.caption_channels,
                                                    "prompt_attention_mask", "an LTX-Video text stage");
  return {t.embeds, t.mask, t.negative_embeds, t.negative_mask};
}

LtxConditioning random_ltx_conditioning(const LtxVideoConfig& config, int64_t batch, int64_t text_tokens,
                                        uint64_t seed) {
  // T5-XXL outputs are of order 0.1-0.3.
  LtxConditioning c;
  c.prompt_embeds = random_text_embeds(batch, text_tokens, config.caption_channels, seed ^ 0x17c5ull, 0.2f);
  c.negative_prompt_embeds = random_text_embeds(batch, text_tokens, config.caption_channels, seed ^ 0x17c6ull, 0.2f);
  return c;
}

Shape ltx_latent_shape(const LtxVideoConfig& config, int64_t batch, int64_t frames, int64_t height, int64_t width,
                       const LtxVaeFactors& vae) {
  CPDIT_CHECK(config.patch_size == 1 && config.patch_size_t == 1, unsupported,
              "the LTX-Video pipeline packs latents with patch 1x1x1; this model has patch_size ", config.patch_size,
              " and patch_size_t ", config.patch_size_t);
  // Patch 1x1x1: the VAE's spatial factor is the whole size unit.
  return video_latent_shape(batch, config.in_channels, frames, height, width, vae.temporal, vae.spatial, vae.spatial);
}

Tensor ltx_pack(const Tensor& latents) {
  CPDIT_CHECK(latents.defined() && latents.dim() == 5, invalid_argument,
              "LTX-Video latents must be (B, C, F, h, w), got ", latents.defined() ? latents.describe() : "undefined");
  const int64_t b = latents.size(0), c = latents.size(1);
  return latents.to(DType::f32).reshape({b, c, -1}).permute({0, 2, 1}).contiguous();
}

Tensor ltx_unpack(const Tensor& tokens, int64_t frames, int64_t height, int64_t width) {
  CPDIT_CHECK(tokens.defined() && tokens.dim() == 3 && tokens.size(1) == frames * height * width, invalid_argument,
              "LTX-Video tokens must be (B, ", frames * height * width, ", C), got ",
              tokens.defined() ? tokens.describe() : "undefined");
  const int64_t b = tokens.size(0), c = tokens.size(2);
  return tokens.to(DType::f32).permute({0, 2, 1}).contiguous().reshape({b, c, frames, height, width});
}

std::array<double, 3> ltx_rope_interpolation_scale(const LtxVaeFactors& vae, double frame_rate) {
  CPDIT_CHECK(std::isfinite(frame_rate) && frame_rate > 0, invalid_argument, "the frame rate must be positive, got ",
              frame_rate);
  return {double(vae.temporal) / frame_rate, double(vae.spatial), double(vae.spatial)};
}

bool ltx_runs_guidance(const LtxConditioning& conditioning, float guidance_scale) {
  return conditioning.negative_prompt_embeds.defined() && guidance_scale > 1.0f;
}

LtxGenerateResult generate_ltx(const nn::Model& model, const LtxVideoConfig& config, Scheduler& scheduler,
                               const LtxConditioning& c, const LtxGenerateOptions& options) {
  CPDIT_CHECK(options.steps >= 1, invalid_argument, "steps must be at least 1, got ", options.steps);
  const int64_t batch = c.prompt_embeds.size(0);
  const Shape shape = ltx_latent_shape(config, batch, options.frames, options.height, options.width, options.vae);
  const int64_t frames = shape[2], height = shape[3], width = shape[4], tokens = frames * height * width;
  Tensor latents;
  if (options.initial_latents.defined()) {
    const Shape packed{batch, tokens, config.in_channels};
    CPDIT_CHECK(options.initial_latents.shape() == packed, invalid_argument, "the initial latents are ",
                options.initial_latents.describe(), "; ", options.frames, " frames of ", options.height, "x",
                options.width, " on this model need them packed as ", shape_string(packed));
    latents = options.initial_latents.to(DType::f32).contiguous();
  } else {
    latents = ltx_pack(randn(shape, options.seed));
  }
  const bool guided = ltx_runs_guidance(c, options.guidance_scale);
  CPDIT_CHECK(guided || options.cfg == nullptr || options.cfg->size() == 1, invalid_argument,
              "CFG-parallel LTX-Video needs classifier-free guidance: negative_prompt_embeds and guidance_scale > 1");

  const std::array<double, 3> rope = ltx_rope_interpolation_scale(options.vae, options.frame_rate);
  const nn::TensorMap grid{{"num_frames", Tensor::full({1}, double(frames), DType::i64)},
                           {"height", Tensor::full({1}, double(height), DType::i64)},
                           {"width", Tensor::full({1}, double(width), DType::i64)},
                           {"rope_interpolation_scale", Tensor::from_vector(std::vector<float>{float(rope[0]),
                                                                            float(rope[1]), float(rope[2])}, {3})}};
  scheduler.schedule(options.steps, tokens);
  LtxGenerateResult result;
  run_steps(0, options.steps, [&](int i) {
    // The pipeline passes the raw timestep (σ·1000 in float32), expanded over the batch.
    const Tensor timestep = Tensor::full({batch}, double(float(scheduler.timestep(i))));
    auto predict = [&](const Tensor& text, const Tensor& mask) {
      nn::TensorMap inputs = grid;
      inputs["hidden_states"] = latents;
      inputs["encoder_hidden_states"] = text;
      inputs["timestep"] = timestep;
      if (mask.defined()) inputs["encoder_attention_mask"] = mask;
      return model.forward(inputs).at("sample");
    };
    Tensor velocity;
    if (guided) {
      const GuidancePair pair =
          predict_cond_uncond([&] { return predict(c.prompt_embeds, c.prompt_attention_mask); },
                              [&] { return predict(c.negative_prompt_embeds, c.negative_prompt_attention_mask); },
                              options.cfg);
      velocity = combine_guidance(pair.cond, pair.uncond, {options.guidance_scale});
    } else {
      velocity = predict(c.prompt_embeds, c.prompt_attention_mask);
    }
    const Tensor noise = scheduler.stochastic() ? ltx_pack(randn(shape, step_noise_seed(options.seed, i))) : Tensor();
    latents = scheduler.step(velocity, i, latents, noise);
  }, options.on_step, options.steps, result.step_seconds,
     {&latents, -1, nullptr, [&](int i) { return scheduler.timestep(i); }});
  result.latents = ltx_unpack(latents, frames, height, width);
  return result;
}

}  // namespace cpdit::pipeline
