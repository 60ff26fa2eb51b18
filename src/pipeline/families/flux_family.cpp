// FluxPipeline and FluxImg2ImgPipeline: flow-match Euler (FLUX.1-dev's schedule without a scheduler
// config), the guidance embedding, true CFG on a negative prompt, latents kept split between steps.
#include "pipeline/families/image_families.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/pipeline/flux_pipeline.hpp>
#include <cpdit/pipeline/latents.hpp>
#include <cpdit/pipeline/family.hpp>
#include <cpdit/pipeline/make_scheduler.hpp>
#include <cpdit/pipeline/presets.hpp>

#include <cmath>

namespace cpdit::pipeline {
namespace {

class FluxFamily final : public Family {
 public:
  std::string name() const override { return "flux"; }
  std::string transformer_class() const override { return "FluxTransformer2DModel"; }
  std::string preset_prefix() const override { return "flux-"; }
  FamilyDefaults defaults() const override { return {.steps = 28}; }
  // FLUX.1-schnell (no guidance embedding) is distilled to 4 steps over 256 text tokens.
  FamilyDefaults file_defaults(const nlohmann::json& config) const override {
    const bool dev = !config.contains("guidance_embeds") || config["guidance_embeds"] != false;
    return dev ? defaults() : FamilyDefaults{.steps = 4, .text_tokens = 256};
  }
  bool takes_init_image() const override { return true; }
  bool has_preview() const override { return true; }
  bool takes_step_cache() const override { return true; }
  // diffusers' FLUX_MAG_RATIOS (hooks/mag_cache.py), measured on FLUX.1-dev and -schnell over 28 steps.
  std::vector<float> mag_ratios() const override {
    return {1.0f,     1.21094f, 1.11719f, 1.07812f, 1.0625f,  1.03906f, 1.03125f, 1.03906f, 1.02344f, 1.03125f,
            1.02344f, 0.98047f, 1.01562f, 1.00781f, 1.0f,     1.00781f, 1.0f,     1.00781f, 1.0f,     1.0f,
            0.99609f, 0.99609f, 0.98047f, 0.98828f, 0.96484f, 0.95703f, 0.93359f, 0.89062f};
  }
  std::string scheduler_name() const override { return "flow-match Euler"; }
  std::vector<std::string> scheduler_choices() const override { return {"euler", "euler_a", "dpm++2m"}; }
  std::string latents_layout() const override { return "flux latents (B, 16, H/8, W/8), before the VAE's scaling/shift"; }

  std::vector<std::string> pipeline_classes() const override { return {"FluxPipeline", "FluxImg2ImgPipeline"}; }
  std::vector<TextSlot> text_slots() const override {
    return {{"tokenizer", "text_encoder", "CLIPTextModel", tokenizers::TokenizerKind::clip_bpe, "--clip-l"},
            {"tokenizer_2", "text_encoder_2", "T5EncoderModel", tokenizers::TokenizerKind::sentencepiece, "--t5xxl"}};
  }

  // CLIP's pooled output and T5's hidden states, for the prompt and a negative prompt (true CFG).
  nn::TensorMap encode_prompt(const TextComponents& c, const PromptEncoding& r) const override {
    nn::TensorMap out;
    auto encode = [&](const std::string& text, const std::string& prefix) {
      // CLIP always reads 77 tokens (its tokenizer's model_max_length); T5 the pipeline's length.
      out[prefix + "pooled_prompt_embeds"] =
          run_text_encoder(c, "tokenizer", "text_encoder", text, 77, false, r.load).at("pooler_output");
      out[prefix + "prompt_embeds"] =
          run_text_encoder(c, "tokenizer_2", "text_encoder_2", text, r.max_sequence_length, false, r.load)
              .at("last_hidden_state");
    };
    encode(r.prompt, "");
    if (r.negative_prompt) encode(*r.negative_prompt, "negative_");
    return out;
  }

  void configure(Transformer& t, const PipelineFolder& folder, const nn::LoadOptions&) const override {
    if (!folder.vae_config.is_null()) t.vae_scale_factor = kl_vae_scale_factor(folder.vae_config, folder.vae_source);
  }

  void check_fits(const Request& r, const Transformer& t) const override {
    check_image_fits(r, t, config_of<models::flux::FluxConfig>(t.model).inner_dim());
  }

  void check(const Request& r, const Transformer& t) const override {
    CPDIT_CHECK(std::isnan(r.guidance) || config_of<models::flux::FluxConfig>(t.model).guidance_embeds,
                invalid_argument, "--guidance is FLUX.1-dev's guidance embedding, and ", t.name,
                " has none (as FLUX.1-schnell): leave it out, or guide with --true-cfg-scale and --negative-prompt");
  }

  // FluxPipeline's guidance 3.5, FluxImg2ImgPipeline's 7.0 (for a model with a guidance embedding);
  // true CFG 1.0: off.
  void fill_guidance(Request& r, const Transformer& t) const override {
    if (std::isnan(r.guidance) && config_of<models::flux::FluxConfig>(t.model).guidance_embeds)
      r.guidance = r.init_image.empty() ? 3.5f : 7.0f;
    if (std::isnan(r.true_cfg_scale)) r.true_cfg_scale = 1.0f;
  }

  std::optional<parallel::ContextParallelPlan> plan() const override { return flux_sharded_latents_plan(); }

  RankLoop loop(const LoopInputs& in) const override {
    const Request& r = in.request;
    const Transformer& t = in.transformer;
    const auto& config = config_of<models::flux::FluxConfig>(t.model);
    auto conditioning = std::make_shared<FluxConditioning>(
        in.text.empty() ? random_flux_conditioning(config, 1, r.text_tokens, r.seed)
                        : flux_conditioning(in.text, text_source(r), config));
    auto start = std::make_shared<ImageStart>(init_image_start(in, config.in_channels / 4));
    parallel::validate_cfg(in.layout.config, false, "FLUX.1's --guidance is an embedding the transformer reads");
    const FlowMatchEulerConfig schedule = !t.preset.empty()             ? flux_preset_scheduler(t.preset)
                                          : !t.scheduler_file.empty() ? FlowMatchEulerConfig::from_file(t.scheduler_file)
                                          : config.guidance_embeds    ? FlowMatchEulerConfig::flux_dev()
                                                                      : FlowMatchEulerConfig::flux_schnell();
    FluxGenerateOptions base;
    base.guidance = std::isnan(r.guidance) ? 0.0f : r.guidance;  // unset: the model has no guidance embedding
    base.true_cfg_scale = r.true_cfg_scale;
    base.vae_scale_factor = t.vae_scale_factor;
    // Built here, so a scheduler the schedule cannot take is refused before any rank starts.
    const std::shared_ptr<const Scheduler> prototype = make_scheduler(r.scheduler, schedule);
    return [&r, &config, conditioning, start, prototype, base](RankRun& run) {
      const std::unique_ptr<Scheduler> scheduler = prototype->clone();
      FluxGenerateOptions options = base;
      set_loop_options(options, r, run);
      options.image = *start;
      FluxGenerateResult result =
          generate_flux(*run.model, config, *scheduler, *conditioning, options, &run.mesh.flat());
      return std::make_pair(result.latents,
                            LoopStats{result.step_seconds, true, result.gather_seconds, result.gather_bytes});
    };
  }
};

}  // namespace

const Family& flux_family() {
  static const FluxFamily family;
  return family;
}

}  // namespace cpdit::pipeline
