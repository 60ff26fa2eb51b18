#pragma once
// The LTX-Video text-to-video denoising loop (diffusers' LTXPipeline between its T5 encoder and its
// VAE): seeded noise latents (B, C, F, H/s, W/s) packed into tokens (B, F·h·w, C) (patch 1x1x1:
// channels last, tokens row-major over frames, rows, columns), the flow-match schedule with LTX-Video's
// options (μ from the video token count, shift_terminal 0.1), one transformer call per timestep — two
// with classifier-free guidance on the negative prompt (default 3.0) — and one Euler step. The
// transformer reads the T5 text with its padding mask, and RoPE coordinates scaled by the VAE's
// compression over the frame rate (rope_interpolation_scale).
//
// Under context parallelism the model's plan splits the video tokens, the text and its mask, and
// gathers its output, so every rank steps the same full latents.
#include <cpdit/comm/communicator.hpp>
#include <cpdit/models/ltx_video/model.hpp>
#include <cpdit/pipeline/flow_match_euler.hpp>
#include <cpdit/pipeline/step_loop.hpp>

#include <nlohmann/json_fwd.hpp>

#include <array>
#include <functional>
#include <string>
#include <vector>

namespace cpdit::pipeline {

// Pixels and frames per latent of an AutoencoderKLLTXVideo, as the pipeline reads them from the VAE:
// its config's spatial_compression_ratio / temporal_compression_ratio when set, else patch_size ·
// 2^k and patch_size_t · 2^k for the k encoder levels that scale (spatio_temporal_scaling). The
// released VAEs: 32 and 8.
struct LtxVaeFactors {
  int64_t spatial = 32, temporal = 8;
  static LtxVaeFactors from_json(const nlohmann::json& vae_config);  // absent fields: diffusers' defaults
};

// What the T5 stage gives the loop (LTXPipeline.encode_prompt): prompt_embeds (B, L, caption_channels)
// with prompt_attention_mask (B, L) (1 = a real token; undefined = all real), and the negative pair
// that classifier-free guidance needs (the negative prompt, default "").
struct LtxConditioning {
  Tensor prompt_embeds, prompt_attention_mask;
  Tensor negative_prompt_embeds, negative_prompt_attention_mask;
};

// The four tensors of a text stage's output or an --embeddings file (`source` names it in errors),
// checked against the model; the negative pair is optional.
LtxConditioning ltx_conditioning(const nn::TensorMap& tensors, const std::string& source,
                                 const models::ltx_video::LtxVideoConfig& config);
// Deterministic stand-ins for demos and benchmarks (no text encoder): a prompt and a negative prompt
// of `text_tokens` tokens each, all real, N(0, 1) scaled to T5-XXL's output magnitude.
LtxConditioning random_ltx_conditioning(const models::ltx_video::LtxVideoConfig& config, int64_t batch,
                                        int64_t text_tokens, uint64_t seed);

// The unpacked latent shape (B, in_channels, (frames - 1)/t + 1, height/s, width/s); refuses sizes that
// are not multiples of s and frame counts that are not t·k + 1, naming the nearest valid ones.
Shape ltx_latent_shape(const models::ltx_video::LtxVideoConfig& config, int64_t batch, int64_t frames,
                       int64_t height, int64_t width, const LtxVaeFactors& vae = {});

// (B, C, F, h, w) -> (B, F·h·w, C), and back (patch 1x1x1, the only one the released models use).
Tensor ltx_pack(const Tensor& latents);
Tensor ltx_unpack(const Tensor& tokens, int64_t frames, int64_t height, int64_t width);

// The pipeline's rope_interpolation_scale: (temporal / frame_rate, spatial, spatial) in float64.
std::array<double, 3> ltx_rope_interpolation_scale(const LtxVaeFactors& vae, double frame_rate);

// True when LTXPipeline runs classifier-free guidance: negative embeddings given and guidance_scale > 1.
bool ltx_runs_guidance(const LtxConditioning& conditioning, float guidance_scale);

// LTXPipeline makes 25 frames per second unless told otherwise (its frame_rate argument).
inline constexpr int kLtxFramesPerSecond = 25;

struct LtxGenerateOptions {
  int steps = 4;
  int64_t frames = 9;                 // t·k + 1
  int64_t height = 256, width = 256;  // pixels, multiples of the VAE's spatial factor
  uint64_t seed = 0;
  double frame_rate = kLtxFramesPerSecond;  // only the RoPE scale reads it
  float guidance_scale = 3.0f;              // LTXPipeline's default
  LtxVaeFactors vae;
  // CFG-parallel: this rank's comm::Mesh::cfg() when the two passes run on two rank groups (the model
  // is parallel over this rank's group); null: both passes here (pipeline/guidance.hpp).
  comm::Communicator* cfg = nullptr;
  // The initial noise packed (B, tokens, in_channels), as diffusers' `latents=`; undefined: seeded.
  Tensor initial_latents;
  StepHook on_step;  // after each step, on every rank (step_loop.hpp)
};

struct LtxGenerateResult {
  Tensor latents;  // (B, C, F, h, w) unpacked, before the VAE's latents_mean/std
  std::vector<double> step_seconds;
};

// Every rank of the model's context-parallel group calls it (the model gathers its own output); with
// options.cfg, every rank of both CFG groups. `model` is an LTXVideoTransformer3DModel of `config`.
LtxGenerateResult generate_ltx(const nn::Model& model, const models::ltx_video::LtxVideoConfig& config,
                               Scheduler& scheduler, const LtxConditioning& conditioning,
                               const LtxGenerateOptions& options);

}  // namespace cpdit::pipeline
