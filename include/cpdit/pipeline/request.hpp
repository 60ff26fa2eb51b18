#pragma once
// One generation asked of an opened Pipeline (pipeline.hpp), and what it gives back. A request holds
// only what changes from call to call (text, sizes, seed, steps, guidance, input images, ranks); the
// model, its scheduler and its components are the pipeline's. Fields left at their "unset" values
// (0, NaN, nullopt, empty) take the family's defaults, which the Result's copy of the request shows.
#include <cpdit/models/vae/autoencoder_kl_wan.hpp>
#include <cpdit/nn/module.hpp>
#include <cpdit/nn/step_cache.hpp>
#include <cpdit/parallel/rank_layout.hpp>
#include <cpdit/pipeline/scheduler.hpp>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace cpdit::pipeline {

class Family;

// Whether a run decodes its latents: never, when the pipeline has a VAE, or always (refused without one).
enum class Decode { no, if_vae, yes };

// A LoRA adapter of a request (nn/lora.hpp): its file, the weight it is applied with, whether it is
// merged into the weights it touches (--lora-merge, diffusers' fuse_lora: no cost per step, a copy of
// each such weight, dense weights only) rather than applied beside them, and whether it is for Wan 2.2's
// low-noise expert (transformer_2/, --lora-2, diffusers' load_into_transformer_2) rather than the
// transformer.
struct LoraChoice {
  std::string path;
  double weight = 1.0;
  bool merge = false;
  bool low_noise = false;
};

struct Request {
  // The text: a prompt through the pipeline's text encoders, or `embeddings` (the tensors encode-prompt
  // writes, named as there), or neither (deterministic random embeddings at the model's widths). A real
  // model runs on random embeddings only when asked to (`random_embeddings`): a picture of no prompt is
  // a test, not hours of work to throw away. Presets, whose weights are random too, take them unasked.
  std::optional<std::string> prompt, negative_prompt;
  nn::TensorMap embeddings;
  bool random_embeddings = false;
  std::string embeddings_source = "the given embeddings";  // names them in errors (e.g. the file)
  Tensor initial_latents;  // the initial noise in the pipeline's layout (diffusers' latents=); undefined: seeded
  int steps = 0;  // 0: the family's default, or the count of scheduler.sigmas
  // The scheduler by name (empty: the family's default, filled in as it ran), --flow-shift, --sigmas.
  SchedulerChoice scheduler;
  int64_t height = 0, width = 0, frames = 0;
  int64_t text_tokens = 0;  // 0: the pipeline's max_sequence_length
  uint64_t seed = 0;
  float guidance = std::nanf("");        // unset: the pipeline's default
  float guidance_2 = std::nanf("");      // Wan 2.2's low-noise expert (guidance_scale_2); unset: guidance
  float true_cfg_scale = std::nanf("");  // unset: FLUX.1 1.0 (off), Qwen-Image 4.0
  // Classifier-free guidance whatever the family calls it (stable-diffusion.cpp's --cfg-scale): the
  // video families' guidance, FLUX.1's and Qwen-Image's true_cfg_scale. Unset: those fields decide.
  float cfg_scale = std::nanf("");
  // Input images (PNG, JPEG or WebP files, read by io::read_image): image-to-video's first and last
  // frame, image-to-image's start.
  std::string first_image, last_image, init_image;
  std::optional<double> strength;  // image-to-image: the share of the schedule run (default 0.6)
  int64_t ar_step = 0;             // SkyReels-V2 diffusion forcing
  // SkyReels-V2's fps input (default 24), LTX-Video's RoPE time scale (default 25), and the clip's rate
  std::optional<int64_t> fps;
  int64_t base_num_frames = 97;  // SkyReels-V2 long video
  std::optional<int64_t> overlap_history;
  double addnoise_condition = 0;
  float decode_timestep = 0.0f;  // LTX-Video's timestep-conditioned VAE
  std::optional<float> decode_noise_scale;
  models::vae::VideoSplit vae_split = models::vae::VideoSplit::rows;
  Decode decode = Decode::no;
  bool check_finite = false;  // every module's outputs checked for NaN/Inf, not only the transformer's
  parallel::RankRequest parallel;
  // A step cache (nn/step_cache.hpp: --cache fbcache:0.08, magcache); kind none: every block of every step.
  // MagCache without ratios takes the family's (FLUX.1: diffusers' FLUX_MAG_RATIOS) or is refused.
  nn::StepCacheConfig cache;
  // Cross-attention keys and values projected once per run where the tokens they come from do not
  // change between steps (nn/text_kv_cache.hpp: exact; Wan, SkyReels-V2, LTX-Video): --text-kv-cache.
  bool text_kv_cache = true;

  // LoRA adapters on the transformer's layers, applied at run time beside its weights (which stay as
  // loaded); several add up. A resident pipeline reads each file once.
  std::vector<LoraChoice> loras;
  // Called on rank 0 after each denoising step (0-based step, steps in all, seconds of that step).
  std::function<void(int step, int total, double seconds)> on_step;
  // diffusers' callback_on_step_end on the latents: called on rank 0 after each step's scheduler step
  // (before on_step) with the step, its timestep and the whole latents in the loop's layout, as diffusers'
  // pipeline holds them (FLUX.1, Qwen-Image packed (B, tokens, 4C), LTX-Video (B, tokens, C), Wan
  // (B, C, F, H, W)) — gathered when the ranks hold them split. A tensor returned (their shape) replaces
  // them on every rank before the next step; nullopt keeps them. Null: nothing is gathered or sent.
  // SkyReels-V2 diffusion forcing, whose frames step apart, refuses it.
  std::function<std::optional<Tensor>(int step, double timestep, const Tensor& latents)> on_step_latents;
  // Set (from any thread; the step callback's) to end the denoising loop after the current step, its
  // latents the result, decoded as usual: diffusers' pipe._interrupt. The ranks agree on it as on
  // `cancel`. SkyReels-V2 diffusion forcing, whose chunks each run a loop, does not end early.
  const std::atomic<bool>* finish = nullptr;
  // Set (from any thread, or a signal handler: it is lock-free) to stop the run. Every rank reads it
  // after each step and the ranks agree on it, so all of them stop after the same step and the pipeline
  // stays usable for the next request. Null: not cancellable.
  const std::atomic<bool>* cancel = nullptr;
};

// What one denoising loop measured.
struct LoopStats {
  std::vector<double> step_seconds;
  bool latents_sharded = false;  // FLUX.1: latents split between steps, gathered once at the end
  double gather_seconds = 0;
  int64_t gather_bytes = 0;
};

struct Result {
  Request request;  // as it ran: the defaults filled in
  const Family* family = nullptr;
  std::string model_name;  // "preset flux-tiny" or the model path
  parallel::RankLayout layout;
  Tensor latents;  // the final latents in the pipeline's layout (rank 0's; each process's own under mpirun)
  // The decoded pixels in [0, 1]: (B, H, W, 3) images or (B, F, H, W, 3) video; undefined without decode.
  Tensor pixels;
  LoopStats loop;
  std::vector<int64_t> peaks;  // each rank's activation peak during the loop
  // With a step cache: each rank's report by rank (under mpirun, this process's only), and the
  // transformer calls computed and skipped over the run (both guidance passes).
  std::vector<nn::StepCacheReport> cache_reports;
  int64_t cache_computed = 0, cache_skipped = 0;
  int64_t cache_modules_computed = 0, cache_modules_predicted = 0;  // TaylorSeer's hooked module calls
  // The text-KV cache's cross-attention projections on the run (rank 0's of each guidance group):
  // those reused and those made.
  int64_t text_kv_reused = 0, text_kv_projected = 0;
};

}  // namespace cpdit::pipeline
