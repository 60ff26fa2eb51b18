// SkyReels-V2: diffusion forcing (SkyReelsV2DiffusionForcingPipeline: frame blocks at their own
// timesteps, long video in overlapping chunks, images as latent frames) for models whose input is the
// latents alone, and image-to-video by conditioning (SkyReelsV2ImageToVideoPipeline) through Wan's loop
// for models with more input channels than output channels.
#include "pipeline/families/wan_families.hpp"
#include "pipeline/input_images.hpp"

#include <cpdit/pipeline/family.hpp>
#include <cpdit/pipeline/skyreels_pipeline.hpp>

#include <algorithm>

namespace cpdit::pipeline {
namespace {

using models::skyreels_v2::SkyReelsV2Config;

const SkyReelsV2Config& skyreels_config(const Transformer& t) { return config_of<SkyReelsV2Config>(t.model); }

// Diffusion forcing takes images as latent frames: its transformer's input is the latents alone.
bool diffusion_forcing(const models::wan::WanConfig& config) {
  return config.out_channels == 0 || config.in_channels == config.out_channels;
}

// SkyReels-V2's flow_shift without a scheduler config: 8 for text-to-video, 5 from an image (a preset's
// is its text-to-video one).
double flow_shift(const Request& r, const Transformer& t) {
  return skyreels_flow_shift(skyreels_config(t), t.preset.empty() && !r.first_image.empty());
}

Tensor tensor_or_none(const nn::TensorMap& tensors, const std::string& name) {
  auto it = tensors.find(name);
  return it == tensors.end() ? Tensor() : it->second;
}

class SkyReelsFamily final : public Family {
 public:
  std::string name() const override { return "skyreels_v2"; }
  std::string transformer_class() const override { return "SkyReelsV2Transformer3DModel"; }
  std::string preset_prefix() const override { return "skyreels-"; }
  FamilyDefaults defaults() const override {
    return {.steps = 50, .height = 480, .width = 832, .frames = 81, .preset_frames = 5};
  }
  bool takes_first_image() const override { return true; }
  std::string scheduler_name() const override { return "UniPC"; }
  // Diffusion forcing steps a UniPC per frame, in place, as diffusers does (step_in_place): only UniPC.
  std::vector<std::string> scheduler_choices() const override { return {"unipc"}; }
  std::string latents_layout() const override { return "wan latents (B, 16, F, H/8, W/8)"; }
  int64_t frame_rate(const Request& r) const override {
    return r.fps.value_or(24);  // SkyReelsV2DiffusionForcingPipeline's fps input
  }

  std::vector<std::string> pipeline_classes() const override { return {"SkyReelsV2DiffusionForcingPipeline", "SkyReelsV2ImageToVideoPipeline"}; }
  std::vector<TextSlot> text_slots() const override {
    return {{"tokenizer", "text_encoder", "UMT5EncoderModel", tokenizers::TokenizerKind::sentencepiece, "--umt5"}};
  }
  nn::TensorMap encode_prompt(const TextComponents& c, const PromptEncoding& r) const override {
    return encode_wan_prompt(c, r);
  }

  void configure(Transformer& t, const PipelineFolder& folder, const nn::LoadOptions&) const override {
    read_wan_vae(t, folder);
  }

  // Its network is Wan's, blocks through nn::run_blocks; diffusion forcing is refused in check().
  bool takes_step_cache() const override { return true; }
  std::vector<std::string> taylor_seer_modules() const override { return wan_taylor_seer_modules(); }

  void check(const Request& r, const Transformer& t) const override {
    const SkyReelsV2Config& config = skyreels_config(t);
    // Its calls denoise frame blocks at their own noise levels, a varying number of frames at a time: no
    // call is a step after the previous one for a cache to skip.
    CPDIT_CHECK(r.cache.kind == nn::StepCacheConfig::Kind::none || !diffusion_forcing(config), invalid_argument,
                "--cache is not supported for SkyReels-V2's diffusion forcing (its image-to-video model takes it)");
    check_first_image_taken(r, t, config, diffusion_forcing(config) || wan_takes_image(config));
    if (wan_takes_image(config)) check_image_to_video(r, t, config);
  }

  void check_fits(const Request& r, const Transformer& t) const override {
    // A long video shows the model at most base_num_frames at a time.
    check_video_fits(r, t, skyreels_config(t),
                     r.overlap_history ? (r.base_num_frames - 1) / t.wan_vae.temporal + 1 : 0);
  }

  // SkyReelsV2ImageToVideoPipeline's 5.0, SkyReelsV2DiffusionForcingPipeline's 6.0.
  void fill_guidance(Request& r, const Transformer& t) const override {
    fill_wan_guidance(r, t, wan_takes_image(skyreels_config(t)) ? 5.0f : 6.0f);
  }

  RankLoop loop(const LoopInputs& in) const override {
    const Request& r = in.request;
    const SkyReelsV2Config& config = skyreels_config(in.transformer);
    if (wan_takes_image(config)) return wan_loop(in, config, flow_shift(r, in.transformer));
    const nn::TensorMap images = skyreels_image_latents(r, in.parts, in.model);
    auto first = std::make_shared<Tensor>(tensor_or_none(images, "first"));
    auto last = std::make_shared<Tensor>(tensor_or_none(images, "last"));
    const UniPCConfig schedule = wan_schedule(in.transformer, flow_shift(r, in.transformer), r.scheduler);
    const int64_t fps = frame_rate(r);
    return video_loop(in, config,
                      [&config, &r, schedule, fps, first, last](const nn::Model& model, const Tensor& embeds,
                                                               const WanGenerateOptions& o) {
                        SkyReelsGenerateOptions options;
                        options.video = o;
                        options.ar_step = r.ar_step;
                        options.fps = fps;
                        options.base_frames = r.base_num_frames;
                        options.overlap_history = r.overlap_history;
                        options.addnoise_condition = r.addnoise_condition;
                        options.first_image_latents = *first;
                        options.last_image_latents = *last;
                        return generate_skyreels_v2(model, config, schedule, embeds, options);
                      });
  }
};

}  // namespace

const Family& skyreels_family() {
  static const SkyReelsFamily family;
  return family;
}

}  // namespace cpdit::pipeline
