// QwenImagePipeline and QwenImageImg2ImgPipeline: Qwen-Image's flow-match schedule, true CFG (4.0 by
// default, rescaled to the conditional norm), the Wan-architecture VAE's one frame.
#include "pipeline/families/image_families.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/pipeline/family.hpp>
#include <cpdit/pipeline/make_scheduler.hpp>
#include <cpdit/pipeline/qwenimage_pipeline.hpp>

#include <cmath>

namespace cpdit::pipeline {
namespace {

FlowMatchEulerConfig schedule_of(const std::string& scheduler_file) {
  return scheduler_file.empty() ? FlowMatchEulerConfig::qwenimage() : FlowMatchEulerConfig::from_file(scheduler_file);
}

class QwenImageFamily final : public Family {
 public:
  std::string name() const override { return "qwenimage"; }
  std::string transformer_class() const override { return "QwenImageTransformer2DModel"; }
  std::string preset_prefix() const override { return "qwen-"; }
  FamilyDefaults defaults() const override { return {.steps = 50}; }
  bool takes_init_image() const override { return true; }
  bool takes_step_cache() const override { return true; }
  std::string scheduler_name() const override { return "flow-match Euler"; }
  std::vector<std::string> scheduler_choices() const override { return {"euler", "euler_a", "dpm++2m"}; }
  std::string latents_layout() const override {
    return "qwenimage latents (B, 16, 1, H/8, W/8), before the VAE's latents_mean/std";
  }

  std::vector<std::string> pipeline_classes() const override {
    return {"QwenImagePipeline", "QwenImageImg2ImgPipeline"};
  }

  // The prompt and the negative prompt (" " by default, as Qwen-Image's own examples give it: true CFG runs
  // at the default scale 4.0) through Qwen2.5-VL; a mask only where a row is padded (never for one prompt).
  std::vector<TextSlot> text_slots() const override {
    return {{"tokenizer", "text_encoder", "Qwen2_5_VLForConditionalGeneration", tokenizers::TokenizerKind::byte_level_bpe, "--text-encoder"}};
  }
  nn::TensorMap encode_prompt(const TextComponents& c, const PromptEncoding& r) const override {
    nn::TensorMap out;
    auto encode = [&](const std::string& text, const std::string& prefix) {
      const QwenPromptEmbeds e = encode_qwenimage_prompts(c, {text}, r.max_sequence_length, r.load);
      out[prefix + "prompt_embeds"] = e.embeds;
      if (e.mask.defined()) out[prefix + "prompt_embeds_mask"] = e.mask;
    };
    encode(r.prompt, "");
    encode(r.negative_prompt.value_or(" "), "negative_");
    return out;
  }

  void configure(Transformer& t, const PipelineFolder& folder, const nn::LoadOptions&) const override {
    if (!folder.vae_config.is_null())
      t.vae_scale_factor = qwenimage_vae_scale_factor(folder.vae_config, folder.vae_source);
  }

  void check_request(const Request& r, const PipelineFolder& folder) const override {
    // Qwen-Image's schedule refuses one step: refused before anything is encoded.
    if (r.steps > 0) schedule_of(folder.scheduler_config).check_steps(r.steps);
    CPDIT_CHECK(r.text_tokens <= kQwenImageMaxSequenceLength, invalid_argument,
                "--text-tokens (max_sequence_length) is at most ", kQwenImageMaxSequenceLength, " for Qwen-Image, got ",
                r.text_tokens);
  }

  void check(const Request& r, const Transformer&) const override {
    CPDIT_CHECK(std::isnan(r.guidance), invalid_argument,
                "--guidance is for guidance-distilled models; Qwen-Image's classifier-free guidance is --true-cfg-scale");
  }

  void fill_guidance(Request& r, const Transformer&) const override {
    if (std::isnan(r.true_cfg_scale)) r.true_cfg_scale = 4.0f;  // QwenImagePipeline's
  }

  void check_fits(const Request& r, const Transformer& t) const override {
    check_image_fits(r, t, config_of<models::qwenimage::QwenImageConfig>(t.model).inner_dim());
  }

  RankLoop loop(const LoopInputs& in) const override {
    const Request& r = in.request;
    const Transformer& t = in.transformer;
    const auto& config = config_of<models::qwenimage::QwenImageConfig>(t.model);
    auto conditioning = std::make_shared<QwenImageConditioning>(
        in.text.empty() ? random_qwenimage_conditioning(config, 1, r.text_tokens, r.seed)
                        : qwenimage_conditioning(in.text, text_source(r), config));
    const float true_cfg_scale = r.true_cfg_scale;
    parallel::validate_cfg(in.layout.config, qwenimage_runs_true_cfg(*conditioning, true_cfg_scale),
                           no_guidance_reason(conditioning->negative_prompt_embeds.defined(),
                                              "--true-cfg-scale is at most 1"));
    auto start = std::make_shared<ImageStart>(init_image_start(in, config.in_channels / 4));
    const FlowMatchEulerConfig schedule = schedule_of(t.scheduler_file);
    const int64_t vae_scale_factor = t.vae_scale_factor;
    // Built here, so a scheduler the schedule cannot take is refused before any rank starts.
    const std::shared_ptr<const Scheduler> prototype = make_scheduler(r.scheduler, schedule);
    return [&r, &config, conditioning, start, prototype, true_cfg_scale, vae_scale_factor](RankRun& run) {
      const std::unique_ptr<Scheduler> scheduler = prototype->clone();
      QwenImageGenerateOptions options;
      set_loop_options(options, r, run);
      options.true_cfg_scale = true_cfg_scale;
      options.cfg = &run.mesh.cfg();
      options.vae_scale_factor = vae_scale_factor;
      options.image = *start;
      QwenImageGenerateResult result = generate_qwenimage(*run.model, config, *scheduler, *conditioning, options);
      return std::make_pair(result.latents, LoopStats{result.step_seconds, false, 0, 0});
    };
  }

  Tensor pixels(const Tensor& decoded) const override { return qwenimage_image_pixels(decoded); }
};

}  // namespace

const Family& qwenimage_family() {
  static const QwenImageFamily family;
  return family;
}

}  // namespace cpdit::pipeline
