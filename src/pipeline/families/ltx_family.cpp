// LTXPipeline: LTX-Video's flow-match schedule, guidance on the negative prompt, T5 text of 128
// tokens, the timestep-conditioned VAE.
#include "pipeline/memory_check.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/pipeline/family.hpp>
#include <cpdit/pipeline/make_scheduler.hpp>
#include <cpdit/pipeline/prompt_encoding.hpp>

#include <cmath>

namespace cpdit::pipeline {
namespace {

using models::ltx_video::LtxVideoConfig;

class LtxFamily final : public Family {
 public:
  std::string name() const override { return "ltx_video"; }
  std::string transformer_class() const override { return "LTXVideoTransformer3DModel"; }
  std::string preset_prefix() const override { return "ltx-"; }
  // LTXPipeline's defaults: 161 frames of 512x704, 50 steps, max_sequence_length 128.
  FamilyDefaults defaults() const override {
    return {.steps = 50, .height = 512, .width = 704, .frames = 161, .preset_frames = 9, .text_tokens = 128};
  }
  bool takes_decode_timestep() const override { return true; }
  bool takes_step_cache() const override { return true; }
  // Its attentions are transformer_blocks.N.attn1 and attn2, which diffusers' default patterns miss.
  std::vector<std::string> taylor_seer_modules() const override {
    return {"^transformer_blocks\\.\\d+\\.attn1$", "^transformer_blocks\\.\\d+\\.attn2$"};
  }
  std::string scheduler_name() const override { return "flow-match Euler"; }
  std::vector<std::string> scheduler_choices() const override { return {"euler", "euler_a", "dpm++2m"}; }
  std::string latents_layout() const override {
    return "ltx latents (B, C, F, H/32, W/32), before the VAE's latents_mean/std";
  }
  int64_t frame_rate(const Request& r) const override { return r.fps.value_or(kLtxFramesPerSecond); }

  std::vector<std::string> pipeline_classes() const override { return {"LTXPipeline"}; }

  // T5 without the mask over max_sequence_length tokens, the mask kept for the transformer; the negative
  // prompt (default "") likewise.
  std::vector<TextSlot> text_slots() const override {
    return {{"tokenizer", "text_encoder", "T5EncoderModel", tokenizers::TokenizerKind::sentencepiece, "--t5xxl"}};
  }
  nn::TensorMap encode_prompt(const TextComponents& c, const PromptEncoding& r) const override {
    nn::TensorMap out;
    auto encode = [&](const std::string& text, const std::string& prefix) {
      // The encoder reads every position (no mask); the mask goes to the transformer.
      nn::TensorMap o = run_text_encoder(c, "tokenizer", "text_encoder", text, r.max_sequence_length, false, r.load);
      out[prefix + "prompt_embeds"] = o.at("last_hidden_state");
      out[prefix + "prompt_attention_mask"] = o.at("attention_mask");
    };
    encode(r.prompt, "");
    encode(r.negative_prompt.value_or(""), "negative_");
    return out;
  }

  void configure(Transformer& t, const PipelineFolder& folder, const nn::LoadOptions&) const override {
    if (!folder.vae_config.is_null()) t.ltx_vae = LtxVaeFactors::from_json(folder.vae_config);
  }

  void check_fits(const Request& r, const Transformer& t) const override {
    const auto& config = config_of<LtxVideoConfig>(t.model);
    const Shape latent = ltx_latent_shape(config, 1, r.frames, r.height, r.width, t.ltx_vae);
    const double elements = double(shape_numel(latent));
    check_generate_fits(elements, elements / double(latent[1]) + double(r.text_tokens), double(config.inner_dim()));
  }

  void fill_guidance(Request& r, const Transformer&) const override {
    if (std::isnan(r.guidance)) r.guidance = 3.0f;  // LTXPipeline's
  }

  RankLoop loop(const LoopInputs& in) const override {
    const Request& r = in.request;
    const Transformer& t = in.transformer;
    const auto& config = config_of<LtxVideoConfig>(t.model);
    auto conditioning = std::make_shared<LtxConditioning>(
        in.text.empty() ? random_ltx_conditioning(config, 1, r.text_tokens, r.seed)
                        : ltx_conditioning(in.text, text_source(r), config));
    const float guidance = r.guidance;
    parallel::validate_cfg(in.layout.config, ltx_runs_guidance(*conditioning, guidance),
                           no_guidance_reason(conditioning->negative_prompt_embeds.defined(), "--guidance is at most 1"));
    const FlowMatchEulerConfig schedule =
        t.scheduler_file.empty() ? FlowMatchEulerConfig::ltx_video() : FlowMatchEulerConfig::from_file(t.scheduler_file);
    const double rate = double(frame_rate(r));
    // Built here, so a scheduler the schedule cannot take is refused before any rank starts.
    const std::shared_ptr<const Scheduler> prototype = make_scheduler(r.scheduler, schedule);
    return [&r, &t, &config, conditioning, guidance, prototype, rate](RankRun& run) {
      const std::unique_ptr<Scheduler> scheduler = prototype->clone();
      LtxGenerateOptions options;
      set_loop_options(options, r, run);
      options.frame_rate = rate;
      options.guidance_scale = guidance;
      options.vae = t.ltx_vae;
      options.cfg = &run.mesh.cfg();
      LtxGenerateResult result = generate_ltx(*run.model, config, *scheduler, *conditioning, options);
      return std::make_pair(result.latents, LoopStats{result.step_seconds, false, 0, 0});
    };
  }
};

}  // namespace

const Family& ltx_family() {
  static const LtxFamily family;
  return family;
}

}  // namespace cpdit::pipeline
