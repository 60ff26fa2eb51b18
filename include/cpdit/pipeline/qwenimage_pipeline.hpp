#pragma once
// The Qwen-Image text-to-image denoising loop (diffusers' QwenImagePipeline between its text encoder
// and its VAE): packed 2x2 latents as FLUX.1 packs them, the flow-match schedule with Qwen-Image's
// options (μ from the image token count, shift_terminal), one transformer call per timestep — two
// with true CFG, combined with the norm rescale (pipeline/guidance.hpp) — and one Euler step.
//
// Under context parallelism the model's own plan splits the tokens at its first block and gathers
// its output, so every rank steps the same full latents.
#include <cpdit/comm/communicator.hpp>
#include <cpdit/models/qwenimage/model.hpp>
#include <cpdit/pipeline/flow_match_euler.hpp>
#include <cpdit/pipeline/image_start.hpp>
#include <cpdit/pipeline/prompt_encoding.hpp>
#include <cpdit/pipeline/step_loop.hpp>

#include <nlohmann/json_fwd.hpp>

#include <functional>
#include <string>
#include <vector>

namespace cpdit::pipeline {

// What the Qwen2.5-VL text stage gives the loop: prompt_embeds (B, L, joint_attention_dim) with
// prompt_embeds_mask (B, L) (1 = a real token; undefined = all real), and optionally the negative
// pair (its own length L'). True CFG runs when the negative embeddings are given and the scale > 1.
struct QwenImageConditioning {
  Tensor prompt_embeds, prompt_embeds_mask;
  Tensor negative_prompt_embeds, negative_prompt_embeds_mask;
};

// QwenImagePipeline's chat template around a prompt, and the tokens of its system prefix that the
// pipeline drops from the hidden states (34: fixed, whatever the tokenizer makes of the prefix).
inline constexpr const char* kQwenImagePromptTemplate =
    "<|im_start|>system\nDescribe the image by detailing the color, shape, size, texture, quantity, text, spatial "
    "relationships of the objects and background:<|im_end|>\n<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n";
inline constexpr int64_t kQwenImagePromptDrop = 34;
// The longest max_sequence_length the pipeline takes (its tokenizer_max_length).
inline constexpr int64_t kQwenImageMaxSequenceLength = 1024;

// QwenImagePipeline.encode_prompt for a batch of prompts: each put in the template, tokenised together
// (at most 1024 + 34 tokens, padded to the longest), run through the Qwen2.5-VL text encoder with the
// mask, each row's real tokens kept with the first 34 dropped, cut to max_sequence_length and padded with
// zeros to the longest row. embeds (B, L, D) f32; mask (B, L) I64, undefined when every token is real
// (as the pipeline returns None). The components are tokenizer/ and text_encoder/.
struct QwenPromptEmbeds {
  Tensor embeds, mask;
};
QwenPromptEmbeds encode_qwenimage_prompts(const TextComponents& components, const std::vector<std::string>& prompts,
                                          int64_t max_sequence_length, const nn::LoadOptions& load = {});

// prompt_embeds [+ prompt_embeds_mask] [+ negative_prompt_embeds [+ negative_prompt_embeds_mask]] of
// a text stage's output or an --embeddings file (`source` names it in errors), checked against the model.
QwenImageConditioning qwenimage_conditioning(const nn::TensorMap& tensors, const std::string& source,
                                             const models::qwenimage::QwenImageConfig& config);
// Deterministic stand-ins for demos and benchmarks (no text encoder): a prompt and a negative prompt
// of `text_tokens` tokens each, N(0, 1) scaled to the magnitude of Qwen2.5-VL hidden states, no padding.
QwenImageConditioning random_qwenimage_conditioning(const models::qwenimage::QwenImageConfig& config,
                                                    int64_t batch, int64_t text_tokens, uint64_t seed);

// Pixels per latent of Qwen-Image's VAE (AutoencoderKLQwenImage), as the pipeline derives it:
// 2^len(temperal_downsample). `source` names the file in errors.
int64_t qwenimage_vae_scale_factor(const nlohmann::json& vae_config, const std::string& source);

struct QwenImageGenerateOptions {
  int steps = 4;
  int64_t height = 256, width = 256;  // pixels, multiples of 2 · vae_scale_factor
  uint64_t seed = 0;
  float true_cfg_scale = 4.0f;   // QwenImagePipeline's default
  // CFG-parallel: this rank's comm::Mesh::cfg() when the two passes run on two rank groups (the model
  // is parallel over this rank's group); null: both passes here (pipeline/guidance.hpp).
  comm::Communicator* cfg = nullptr;
  int64_t vae_scale_factor = 8;  // qwenimage_vae_scale_factor of the pipeline's VAE
  // The initial noise packed (B, tokens, in_channels), as diffusers' `latents=`; undefined: seeded. From an
  // image, given latents are the loop's start as they are (QwenImageImg2ImgPipeline does not noise them).
  Tensor initial_latents;
  // Image-to-image (QwenImageImg2ImgPipeline) when image.image_latents is defined: the schedule's first
  // skipped_steps(steps, strength) steps skipped, the loop started from the image's latents noised to the
  // first step kept (with the seeded noise).
  ImageStart image;
  StepHook on_step;  // after each step, on every rank (step_loop.hpp)
};

struct QwenImageGenerateResult {
  Tensor latents;  // (B, C, 1, H/f, W/f): one frame for the Wan-architecture VAE, before its denormalisation
  std::vector<double> step_seconds;
};

// QwenImagePipeline's image from the one-frame pixels its Wan-architecture VAE decodes: (B, 1, H, W, 3)
// to (B, H, W, 3).
Tensor qwenimage_image_pixels(const Tensor& frame_pixels);

// True when QwenImagePipeline runs true CFG: a negative prompt given and true_cfg_scale > 1.
bool qwenimage_runs_true_cfg(const QwenImageConditioning& conditioning, float true_cfg_scale);

// Every rank of the model's context-parallel group calls it (the model gathers its own output); with
// options.cfg, every rank of both CFG groups.
// `model` is a QwenImageTransformer2DModel of `config`.
QwenImageGenerateResult generate_qwenimage(const nn::Model& model, const models::qwenimage::QwenImageConfig& config,
                                           Scheduler& scheduler,
                                           const QwenImageConditioning& conditioning,
                                           const QwenImageGenerateOptions& options);

}  // namespace cpdit::pipeline
