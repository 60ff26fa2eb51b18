#pragma once
// SkyReels-V2 text-to-video and image-to-video by diffusion forcing (diffusers'
// SkyReelsV2DiffusionForcingPipeline and SkyReelsV2DiffusionForcingImageToVideoPipeline).
// Every latent frame has its own timestep: the timestep matrix says, iteration by iteration, which
// timestep each frame is fed and which frames take a step, so a block of frames can run ar_step steps
// ahead of the next ("asynchronous" generation); each frame keeps its own UniPC state and steps only
// where the matrix says so, driven as diffusers drives it (UniPCMultistepScheduler::step_in_place).
//
// A clip longer than base_num_frames is made in chunks of that many frames (long video): each later
// chunk starts from the last overlap_history frames of what came before (its prefix, counted as
// ready in its timestep matrix, optionally fed to the model with a little fresh noise:
// addnoise_condition) and adds only its frames past the overlap to the clip.
//
// Image-to-video needs no image encoder: the image's normalised VAE latents (skyreels_image.hpp) are the
// first chunk's prefix, as an overlap is a later chunk's; a last image's latents are appended after
// the last chunk's frames, fed at timestep 0 and never stepped.
//
// Under context parallelism the model gathers its output (the SkyReels-V2 plan), so every rank
// steps the same full latents with the same per-frame schedulers, as in the Wan loop.
#include <cpdit/models/skyreels_v2/model.hpp>
#include <cpdit/pipeline/unipc.hpp>
#include <cpdit/pipeline/wan_pipeline.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

namespace cpdit::pipeline {

// diffusers' generate_timestep_matrix, one row per iteration and one column per latent frame.
struct TimestepMatrix {
  std::vector<std::vector<int64_t>> timesteps;   // what each frame is fed (999 before it starts, 0 once done)
  std::vector<std::vector<int64_t>> step_index;  // into [999, step_template..., 0]
  std::vector<std::vector<bool>> update;         // the frame takes a scheduler step at this iteration
  std::vector<std::pair<int64_t, int64_t>> window;  // [first, end) of the frames the model sees
};

// Frames go in blocks of causal_block_size (num_latent_frames must be a multiple); block i + 1 starts
// ar_step iterations after block i (0: all frames in step). The first num_pre_ready frames count as
// denoised. The model sees at most base_num_latent_frames frames at a time, sliding forward as the
// first frames finish; when it sees fewer than the clip, ar_step must be at least
// ceil(steps / blocks per window), else an invalid_argument error.
TimestepMatrix generate_timestep_matrix(int64_t num_latent_frames, const std::vector<int64_t>& step_template,
                                        int64_t base_num_latent_frames, int64_t ar_step, int64_t num_pre_ready = 0,
                                        int64_t causal_block_size = 1);

// One chunk of a clip, in latent frames: `frames` denoised together, of which the first `prefix` are
// copied from the clip so far (starting `overlap` frames before its end) and the frames from `overlap`
// on are appended to the clip.
struct SkyReelsChunk {
  int64_t frames = 0, prefix = 0, overlap = 0;
  bool operator==(const SkyReelsChunk&) const = default;
};

// The chunks of a clip of `latent_frames`, as SkyReelsV2DiffusionForcingPipeline cuts it: without
// overlap (or when the clip fits in base_latent_frames) one chunk of the whole clip; else a first
// chunk of base_latent_frames, then chunks of up to base_latent_frames that each overlap the clip so
// far by overlap_latent_frames, the prefix cut down to whole blocks of block_frames. Refuses
// (invalid_argument) a clip, or a chunk, that is not whole blocks (diffusers would leave the last
// frames noisy), an overlap that is not shorter than the chunk, and one shorter than a block.
std::vector<SkyReelsChunk> skyreels_chunks(int64_t latent_frames, int64_t base_latent_frames,
                                           std::optional<int64_t> overlap_latent_frames, int64_t block_frames);

// The flow_shift SkyReels-V2 samples with when no scheduler config sets it: 5.0 for image-to-video
// (models of in_channels 36: the noise, a 4-channel first-frame mask and the image's 16 latent
// channels; or a diffusion-forcing model given a first image), 8.0 for text-to-video, as SkyReels-V2's
// model cards and diffusers' examples set it.
double skyreels_flow_shift(const models::wan::WanConfig& config, bool image_to_video = false);

struct SkyReelsGenerateOptions {
  // steps, frames, size, seed, VAE factors, initial latents (the first chunk's), guidance and the
  // negative embeddings, as for Wan; the pipeline's default guidance_scale is 6.0.
  WanGenerateOptions video;
  int64_t ar_step = 0;  // 0: synchronous, every frame at the same timestep
  int64_t fps = 24;     // fed to models with inject_sample_info: 16 is row 0 of the fps embedding, else row 1
  // Long video, in pixel frames as the pipeline takes them (latent frames: (n - 1) / 4 + 1): a clip of
  // more than base_frames frames needs overlap_history.
  int64_t base_frames = 97;
  std::optional<int64_t> overlap_history;
  // > 0: a later chunk's prefix is fed to the model as (1 - c/1000) x + (c/1000) noise at timestep
  // int(c), fresh noise at every iteration (the prefix itself stays clean).
  double addnoise_condition = 0;
  // Image-to-video: the normalised latents (B or 1, C, F', h, w) of the first image, the first chunk's
  // prefix in place of its first F' noise frames (counted as ready in its timestep matrix when they are
  // whole blocks, as diffusers counts them; fed with noise under addnoise_condition like any prefix);
  // and of a last image, appended after the last chunk's frames (which must then still be whole blocks),
  // fed at timestep 0, never stepped, and left out of the result. Undefined: none.
  Tensor first_image_latents, last_image_latents;
  // Random draw number `draw` of `shape`, in the order the pipeline draws: each chunk's initial latents
  // (its prefix frames then overwritten), and within a chunk with a prefix and addnoise_condition one
  // per iteration for its prefix. Every rank must get the same numbers. Unset: draw 0 is
  // video.initial_latents or seeded noise (video.seed), draw n > 0 seeded noise of its own stream.
  std::function<Tensor(int64_t draw, const Shape& shape)> noise;
};

// Every rank of the model's context-parallel group calls it. `model` is a SkyReelsV2Transformer3DModel
// of `config`; `scheduler` is the UniPC configuration each frame's scheduler copies. Frames go in
// blocks of the model's num_frame_per_block, as the pipeline does when causal_block_size is not given.
WanGenerateResult generate_skyreels_v2(const nn::Model& model, const models::skyreels_v2::SkyReelsV2Config& config,
                                       const UniPCConfig& scheduler, const Tensor& prompt_embeds,
                                       const SkyReelsGenerateOptions& options);

}  // namespace cpdit::pipeline
