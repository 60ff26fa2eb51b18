#pragma once
// The Wan 2.x text-to-video denoising loop (diffusers' WanPipeline): seeded noise latents
// (B, 16, F, H/8, W/8), the UniPC flow-prediction schedule, one transformer call (two with
// classifier-free guidance) and one UniPC step per timestep. With an image condition (wan_image.hpp)
// it is WanImageToVideoPipeline's loop: the condition beside the latents on channels, the image tokens
// in both guidance passes.
//
// Under context parallelism the model splits the tokens after its patch embedding and gathers its
// output (the Wan plan), so every rank steps the same full latents; UniPC's multistep state is
// replicated.
#include <cpdit/comm/communicator.hpp>
#include <cpdit/models/wan/model.hpp>
#include <cpdit/pipeline/step_loop.hpp>
#include <cpdit/pipeline/unipc.hpp>
#include <cpdit/pipeline/wan_image.hpp>

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace cpdit::pipeline {

// Wan 2.x makes 16 frames per second of video (diffusers' Wan examples export at fps=16).
inline constexpr int kWanFramesPerSecond = 16;

// Pixels and frames per latent, from the VAE config's scale_factor_spatial / scale_factor_temporal
// as WanPipeline reads them (Wan 2.1's VAE: 8 and 4).
struct WanVaeFactors {
  int64_t spatial = 8, temporal = 4;
  static WanVaeFactors from_json(const nlohmann::json& vae_config);  // absent fields keep the defaults
};

struct WanGenerateOptions {
  int steps = 4;
  int64_t frames = 17;                // (frames - 1) divisible by 4: the VAE's temporal factor
  int64_t height = 256, width = 256;  // pixels, multiples of 16
  uint64_t seed = 0;
  WanVaeFactors vae;
  // Classifier-free guidance runs when negative_prompt_embeds is given and guidance_scale > 1, as
  // WanPipeline: noise_uncond + guidance_scale * (noise_cond - noise_uncond).
  float guidance_scale = 5.0f;
  Tensor negative_prompt_embeds;  // (B, L', text_dim)
  // CFG-parallel: this rank's comm::Mesh::cfg() when the two passes run on two rank groups (the model
  // is parallel over this rank's group); null: both passes here (pipeline/guidance.hpp).
  comm::Communicator* cfg = nullptr;
  // The initial latents (B, C, F', h, w), as diffusers' `latents=` argument; undefined: seeded noise.
  Tensor initial_latents;
  // Image-to-video: what wan_image_condition and wan_image_embeds made, each repeated over the batch as
  // the pipeline repeats them. Required by a model that takes an image (wan_takes_image), refused by others.
  WanImageConditioning image;
  // Wan 2.2 A14B's low-noise expert (the pipelines' transformer_2): it takes the timesteps below
  // boundary_timestep (boundary_ratio x num_train_timesteps), its two guidance passes combined at its own
  // guidance_scale (guidance_scale_2); whether guidance runs is still decided by guidance_scale above, as
  // the pipelines decide it. Null model: the loop's model takes every step. Same config as the loop's.
  struct LowNoiseExpert {
    const nn::Model* model = nullptr;
    double boundary_timestep = 0;
    float guidance_scale = 0;
  } low_noise;
  StepHook on_step;  // after each step, on every rank (step_loop.hpp)
};

struct WanGenerateResult {
  Tensor latents;  // (B, 16, F, H/8, W/8)
  std::vector<double> step_seconds;
};

// `name` (B, L, text_dim) of what a UMT5 text-encoder stage writes (prompt_embeds,
// negative_prompt_embeds), from the encode stage or an --embeddings file (`source` names it in
// errors); or deterministic random ones for demos.
Tensor wan_prompt_embeds(const nn::TensorMap& tensors, const std::string& source, const models::wan::WanConfig& config,
                         const std::string& name = "prompt_embeds");
Tensor random_wan_prompt_embeds(const models::wan::WanConfig& config, int64_t batch, int64_t text_tokens,
                                uint64_t seed);

// The latent shape for a clip: refuses sizes that are not multiples of the spatial factor times the
// patch (16 for Wan 2.1) and frame counts that are not temporal·k + 1, naming the nearest valid ones.
Shape wan_latent_shape(const models::wan::WanConfig& config, int64_t batch, int64_t frames, int64_t height,
                       int64_t width, const WanVaeFactors& vae = {});

// True when WanPipeline runs classifier-free guidance: negative embeddings given and guidance_scale > 1.
bool wan_runs_guidance(const Tensor& negative_prompt_embeds, float guidance_scale);

// The initial latents of `shape`: options.initial_latents (checked against the shape) or seeded noise.
Tensor initial_wan_latents(const Shape& shape, const WanGenerateOptions& options);

// The model's `sample` for `inputs` (all but encoder_hidden_states) with the prompt, guided as
// WanPipeline when wan_runs_guidance: noise_uncond + scale * (noise_cond - noise_uncond), `scale`
// options.guidance_scale unless given, one f32 rounding per op in diffusers' order; the two passes
// serial or on two CFG groups (options.cfg, pipeline/guidance.hpp). Collective over options.cfg.
Tensor guided_prediction(const nn::Model& model, nn::TensorMap inputs, const Tensor& prompt_embeds,
                         const WanGenerateOptions& options, std::optional<float> scale = std::nullopt);

// Every rank of the model's context-parallel group calls it (the model gathers its own output); with
// options.cfg, every rank of both CFG groups.
// `model` is a WanTransformer3DModel of `config`.
WanGenerateResult generate_wan(const nn::Model& model, const models::wan::WanConfig& config,
                               Scheduler& scheduler, const Tensor& prompt_embeds,
                               const WanGenerateOptions& options);

}  // namespace cpdit::pipeline
