#include "pipeline/families/wan_families.hpp"
#include "pipeline/input_images.hpp"
#include "pipeline/memory_check.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/pipeline/make_scheduler.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace cpdit::pipeline {

nn::TensorMap encode_wan_prompt(const TextComponents& c, const PromptEncoding& r) {
  nn::TensorMap out;
  auto encode = [&](const std::string& text) {
    nn::TensorMap o = run_text_encoder(c, "tokenizer", "text_encoder", collapse_whitespace(text),
                                       r.max_sequence_length, true, r.load);
    // The pipeline trims each row to its tokens and pads it back with zeros.
    Tensor h = o.at("last_hidden_state").contiguous();
    const int64_t len = h.size(1), width = h.size(2);
    const int64_t* mask = o.at("attention_mask").data<int64_t>();
    for (int64_t s = 0; s < len; ++s)
      if (mask[s] == 0) std::memset(h.data<float>() + s * width, 0, size_t(width) * sizeof(float));
    return h;
  };
  out["prompt_embeds"] = encode(r.prompt);
  out["negative_prompt_embeds"] = encode(r.negative_prompt.value_or(""));
  return out;
}

void read_wan_vae(Transformer& t, const PipelineFolder& folder) {
  if (!folder.vae_config.is_null()) t.wan_vae = WanVaeFactors::from_json(folder.vae_config);
}

UniPCConfig wan_schedule(const Transformer& t, double flow_shift) {
  return t.scheduler_file.empty() ? UniPCConfig::wan21(flow_shift) : UniPCConfig::from_file(t.scheduler_file);
}

UniPCConfig wan_schedule(const Transformer& t, double flow_shift, const SchedulerChoice& choice) {
  UniPCConfig c = wan_schedule(t, flow_shift);
  if (choice.flow_shift) c.flow_shift = *choice.flow_shift;
  c.sigmas = choice.sigmas;
  return c;
}

void check_first_image_taken(const Request& r, const Transformer& t, const models::wan::WanConfig& config,
                             bool takes_it) {
  CPDIT_CHECK(r.first_image.empty() || takes_it, invalid_argument,
              "--first-image is for Wan 2.1 and SkyReels-V2 image-to-video (more in_channels than out_channels) and "
              "SkyReels-V2 diffusion forcing (in_channels equal to out_channels); ", t.name, " is a ",
              t.model.class_name, " of in_channels ", config.in_channels);
}

void check_image_to_video(const Request& r, const Transformer& t, const models::wan::WanConfig& config) {
  CPDIT_CHECK(!r.first_image.empty(), invalid_argument, t.name, " is an image-to-video ", t.model.class_name,
              " (in_channels ", config.in_channels, "): give the clip's first frame with --first-image");
  // With CLIP tokens, a model reads one image's (I2V) or the first and last image's together (FLF2V:
  // pos_embed_seq_len); without them the last image enters through the condition alone.
  const bool needs_last = config.image_dim > 0 && config.pos_embed_seq_len > 0;
  CPDIT_CHECK(config.image_dim == 0 || needs_last == !r.last_image.empty(), invalid_argument, t.name,
              needs_last ? " is a first-last-frame model (pos_embed_seq_len set): give --last-image too"
                         : " conditions on one image's CLIP tokens: --last-image needs a first-last-frame model");
}

void check_video_fits(const Request& r, const Transformer& t, const models::wan::WanConfig& config,
                      int64_t model_frames) {
  const Shape latent = wan_latent_shape(config, 1, r.frames, r.height, r.width, t.wan_vae);
  const double elements = double(shape_numel(latent));
  const int64_t seen = model_frames > 0 ? std::min(latent[2], model_frames) : latent[2];
  check_generate_fits(elements,
                      elements / double(latent[1] * config.patch_volume()) * double(seen) / double(latent[2]),
                      double(config.inner_dim()));
}

void fill_wan_guidance(Request& r, const Transformer& t, float guidance) {
  if (std::isnan(r.guidance)) r.guidance = guidance;
  if (std::isnan(r.guidance_2) && t.low_noise) r.guidance_2 = r.guidance;
}

RankLoop video_loop(const LoopInputs& in, const models::wan::WanConfig& config, VideoGenerate generate) {
  const Request& r = in.request;
  const Transformer& t = in.transformer;
  auto embeds = std::make_shared<Tensor>(in.text.empty()
                                             ? random_wan_prompt_embeds(config, 1, r.text_tokens, r.seed)
                                             : wan_prompt_embeds(in.text, text_source(r), config));
  // Guidance needs the negative prompt's embeddings; without them the loop runs unguided.
  auto negative = std::make_shared<Tensor>();
  if (in.text.count("negative_prompt_embeds"))
    *negative = wan_prompt_embeds(in.text, text_source(r), config, "negative_prompt_embeds");
  const float guidance = r.guidance;
  parallel::validate_cfg(in.layout.config, wan_runs_guidance(*negative, guidance),
                         no_guidance_reason(negative->defined(), "--guidance is at most 1"));
  const float guidance_2 = r.guidance_2;
  return [&r, &t, guidance, guidance_2, generate, embeds, negative](RankRun& run) {
    WanGenerateOptions options;
    set_loop_options(options, r, run);
    options.cfg = &run.mesh.cfg();
    options.guidance_scale = guidance;
    options.negative_prompt_embeds = *negative;
    options.vae = t.wan_vae;
    if (run.low_noise) options.low_noise = {run.low_noise.get(), t.boundary_timestep, guidance_2};
    WanGenerateResult result = generate(*run.model, *embeds, options);
    return std::make_pair(result.latents, LoopStats{result.step_seconds, false, 0, 0});
  };
}

RankLoop wan_loop(const LoopInputs& in, const models::wan::WanConfig& config, double flow_shift) {
  auto image = std::make_shared<WanImageConditioning>(
      wan_takes_image(config) ? wan_image_conditioning(in.request, in.parts, in.model, config,
                                                       in.transformer.wan_vae.temporal)
                              : WanImageConditioning{});
  // Built here, so a scheduler the schedule cannot take is refused before any rank starts.
  const std::shared_ptr<const Scheduler> prototype =
      make_scheduler(in.request.scheduler, wan_schedule(in.transformer, flow_shift));
  return video_loop(in, config,
                    [&config, prototype, image](const nn::Model& model, const Tensor& embeds,
                                                const WanGenerateOptions& o) {
                      const std::unique_ptr<Scheduler> scheduler = prototype->clone();
                      WanGenerateOptions options = o;
                      options.image = *image;
                      return generate_wan(model, config, *scheduler, embeds, options);
                    });
}

std::vector<std::string> wan_taylor_seer_modules() { return {"^blocks\\.\\d+\\.attn1$", "^blocks\\.\\d+\\.attn2$"}; }

}  // namespace cpdit::pipeline
