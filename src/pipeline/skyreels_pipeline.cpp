#include <cpdit/core/error.hpp>
#include <cpdit/pipeline/latents.hpp>
#include <cpdit/pipeline/random.hpp>
#include <cpdit/pipeline/skyreels_pipeline.hpp>
#include <cpdit/pipeline/step_loop.hpp>

#include <algorithm>

namespace cpdit::pipeline {

TimestepMatrix generate_timestep_matrix(int64_t num_latent_frames, const std::vector<int64_t>& step_template,
                                        int64_t base_num_latent_frames, int64_t ar_step, int64_t num_pre_ready,
                                        int64_t causal_block_size) {
  CPDIT_CHECK(!step_template.empty(), invalid_argument, "the timestep matrix needs at least one timestep");
  CPDIT_CHECK(causal_block_size >= 1 && num_latent_frames >= causal_block_size &&
                  num_latent_frames % causal_block_size == 0,
              invalid_argument, num_latent_frames, " latent frames do not split into blocks of ", causal_block_size);
  CPDIT_CHECK(base_num_latent_frames >= causal_block_size && ar_step >= 0 && num_pre_ready >= 0 &&
                  num_pre_ready <= num_latent_frames,
              invalid_argument, "the timestep matrix needs a window of at least one block (", base_num_latent_frames,
              " frames), ar_step >= 0 (", ar_step, ") and 0 to ", num_latent_frames, " ready frames (", num_pre_ready,
              ")");
  const int64_t steps = int64_t(step_template.size()), iterations = steps + 1;
  const int64_t blocks = num_latent_frames / causal_block_size, window_blocks = base_num_latent_frames / causal_block_size;
  if (window_blocks < blocks) {
    // A sliding window needs the first blocks to finish before later ones can enter it.
    const int64_t min_ar_step = (steps + window_blocks - 1) / window_blocks;
    CPDIT_CHECK(double(ar_step) >= double(steps) / double(window_blocks), invalid_argument,
                "ar_step should be at least ", min_ar_step, " when the model sees ", window_blocks, " of ", blocks,
                " frame blocks at a time");
  }
  // Row values index [999 (not started), step_template..., 0 (done)].
  std::vector<int64_t> timestep_of{999};
  timestep_of.insert(timestep_of.end(), step_template.begin(), step_template.end());
  timestep_of.push_back(0);

  std::vector<int64_t> previous(size_t(blocks), 0);
  std::fill_n(previous.begin(), num_pre_ready / causal_block_size, iterations);
  std::vector<std::vector<bool>> block_update;
  TimestepMatrix m;
  auto per_frame = [&](const auto& row) {
    std::vector<typename std::decay_t<decltype(row)>::value_type> frames;
    for (const auto& value : row) frames.insert(frames.end(), size_t(causal_block_size), value);
    return frames;
  };
  while (std::any_of(previous.begin(), previous.end(), [&](int64_t p) { return p < iterations - 1; })) {
    std::vector<int64_t> row(static_cast<size_t>(blocks));
    for (size_t i = 0; i < row.size(); ++i) {
      // The first block, or one whose predecessor is done, advances one step; any other lags its
      // predecessor by ar_step.
      const bool leads = i == 0 || previous[i - 1] >= iterations - 1;
      row[i] = std::clamp<int64_t>(leads ? previous[i] + 1 : row[i - 1] - ar_step, 0, iterations);
    }
    std::vector<bool> update(row.size());
    std::vector<int64_t> timesteps(row.size());
    for (size_t i = 0; i < row.size(); ++i) {
      update[i] = row[i] != previous[i] && row[i] != iterations;
      timesteps[i] = timestep_of[size_t(row[i])];
    }
    block_update.push_back(update);
    m.timesteps.push_back(per_frame(timesteps));
    m.step_index.push_back(per_frame(row));
    m.update.push_back(per_frame(update));
    previous = row;
  }
  // The window ends at the first block not yet started and slides right when a block past its end
  // starts; it spans at most window_blocks blocks.
  int64_t end = window_blocks;
  for (const std::vector<bool>& update : block_update) {
    if (end < blocks && update[size_t(end)]) ++end;
    m.window.emplace_back(std::max<int64_t>(end - window_blocks, 0) * causal_block_size, end * causal_block_size);
  }
  return m;
}

namespace {

// SkyReelsV2DiffusionForcingPipeline's fps input: 0 for 16 fps, 1 otherwise, one per batch item.
Tensor fps_input(int64_t fps, int64_t batch) { return Tensor::full({batch}, fps == 16 ? 0.0 : 1.0, DType::i64); }

// The timesteps of `row` for frames [first, end), frames before `noisy_prefix` fed `prefix_timestep`
// instead, expanded over the batch: (B, end - first) I64.
Tensor window_timesteps(const std::vector<int64_t>& row, int64_t first, int64_t end, int64_t batch,
                        int64_t noisy_prefix, int64_t prefix_timestep) {
  std::vector<float> values;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t f = first; f < end; ++f)  // <= 999: exact in f32
      values.push_back(float(f < noisy_prefix ? prefix_timestep : row[size_t(f)]));
  return Tensor::from_vector(values, {batch, end - first}).to(DType::i64);
}

// Random draw `draw` of `shape`: the caller's source, else the first chunk's given latents or seeded
// noise, every later draw from a stream of its own.
Tensor draw_noise(const SkyReelsGenerateOptions& options, int64_t draw, const Shape& shape) {
  Tensor noise;
  if (options.noise) {
    noise = options.noise(draw, shape);
  } else if (draw == 0 && options.video.initial_latents.defined()) {
    noise = options.video.initial_latents;
  } else {
    uint64_t stream = options.video.seed + 0x9e3779b97f4a7c15ull * uint64_t(draw);  // draw 0: the seed itself
    noise = randn(shape, draw == 0 ? options.video.seed : (stream ^ (stream >> 31)) * 0xbf58476d1ce4e5b9ull);
  }
  CPDIT_CHECK(noise.shape() == shape, invalid_argument, "random draw ", draw, " (", draw == 0 ? "the initial latents" : "noise",
              ") is ", noise.describe(), "; this clip needs ", shape_string(shape));
  return noise.to(DType::f32).contiguous();
}

// The prefix as the model sees it under addnoise_condition c: (1 - c/1000) x + (c/1000) noise, each
// factor rounded to float32 first and one rounding per op, as PyTorch computes it.
Tensor noisy_prefix(const Tensor& prefix, const Tensor& noise, double addnoise_condition) {
  const double noise_factor = 0.001 * addnoise_condition;
  const float keep = float(1.0 - noise_factor), add = float(noise_factor);
  Tensor out = Tensor::empty(prefix.shape(), DType::f32);
  const float *x = prefix.data<float>(), *n = noise.data<float>();
  float* o = out.data<float>();
  for (int64_t i = 0; i < out.numel(); ++i) o[i] = x[i] * keep + n[i] * add;
  return out;
}

// One chunk's timestep matrix: the whole chunk in one window, its prefix ready; `end_frames` given frames
// after it (a last image's) scheduled as frames of the chunk, then fed at timestep 0 and never stepped,
// as the image-to-video pipeline overwrites their columns.
TimestepMatrix chunk_matrix(const SkyReelsChunk& chunk, int64_t end_frames, const std::vector<int64_t>& timesteps,
                            int64_t ar_step, int64_t block) {
  const int64_t frames = chunk.frames + end_frames;
  TimestepMatrix m = generate_timestep_matrix(frames, timesteps, frames, ar_step, chunk.prefix, block);
  for (size_t i = 0; i < m.timesteps.size(); ++i)
    for (int64_t f = chunk.frames; f < frames; ++f) {
      m.timesteps[i][size_t(f)] = 0;
      m.update[i][size_t(f)] = false;
    }
  return m;
}

// Image latents (1 or B, C, F', h, w) as F' frames (B, C, 1, h, w) of a clip of `shape`; `what` names
// them in errors.
std::vector<Tensor> image_frames(const Tensor& latents, const Shape& shape, const char* what) {
  if (!latents.defined()) return {};
  CPDIT_CHECK(latents.dim() == 5 && (latents.size(0) == 1 || latents.size(0) == shape[0]) &&
                  latents.size(1) == shape[1] && latents.size(3) == shape[3] && latents.size(4) == shape[4],
              invalid_argument, what, " latents must be (1 or ", shape[0], ", ", shape[1], ", F, ", shape[3], ", ",
              shape[4], "), got ", latents.describe());
  const Tensor batch = latents.size(0) == shape[0]
                           ? latents.to(DType::f32)
                           : repeated_over_batch(latents.to(DType::f32), shape[0]);
  std::vector<Tensor> frames;
  for (int64_t f = 0; f < batch.size(2); ++f) frames.push_back(batch.narrow(2, f, 1).contiguous());
  return frames;
}

}  // namespace

WanGenerateResult generate_skyreels_v2(const nn::Model& model, const models::skyreels_v2::SkyReelsV2Config& config,
                                       const UniPCConfig& scheduler, const Tensor& prompt_embeds,
                                       const SkyReelsGenerateOptions& options) {
  const WanGenerateOptions& video = options.video;
  CPDIT_CHECK(video.steps >= 1, invalid_argument, "steps must be at least 1, got ", video.steps);
  CPDIT_CHECK(options.base_frames >= 1 && (!options.overlap_history || *options.overlap_history >= 1) &&
                  options.addnoise_condition >= 0 && options.addnoise_condition < 1000,
              invalid_argument, "base_num_frames and overlap_history must be at least 1 (", options.base_frames,
              ", ", options.overlap_history.value_or(0), ") and addnoise_condition in [0, 1000) (",
              options.addnoise_condition, ")");
  const int64_t batch = prompt_embeds.size(0), block = config.num_frame_per_block;
  const Shape shape = wan_latent_shape(config, batch, video.frames, video.height, video.width, video.vae);
  const int64_t temporal = video.vae.temporal;
  auto latent_frames = [&](int64_t frames) { return (frames - 1) / temporal + 1; };  // as the pipeline rounds
  CPDIT_CHECK(video.frames <= options.base_frames || options.overlap_history, invalid_argument, video.frames,
              " frames are more than base_num_frames (", options.base_frames,
              "): a long video needs overlap_history (frames each chunk shares with the one before)");
  std::vector<SkyReelsChunk> chunks =
      skyreels_chunks(shape[2], latent_frames(options.base_frames),
                      options.overlap_history ? std::optional(latent_frames(*options.overlap_history)) : std::nullopt,
                      block);
  // Image-to-video: the first image is the first chunk's prefix (and the clip's first frames), the last
  // image's frames follow the last chunk.
  const std::vector<Tensor> first_image = image_frames(options.first_image_latents, shape, "the first image's");
  const std::vector<Tensor> last_image = image_frames(options.last_image_latents, shape, "the last image's");
  CPDIT_CHECK(int64_t(first_image.size()) < chunks.front().frames, invalid_argument, "the first image's ",
              first_image.size(), " latent frames leave none to generate in a chunk of ", chunks.front().frames);
  if (!first_image.empty()) chunks.front().prefix = int64_t(first_image.size());
  const int64_t end_frames = int64_t(last_image.size());

  UniPCMultistepScheduler frame_scheduler(scheduler);
  frame_scheduler.set_timesteps(video.steps);
  // Every chunk's matrix first: a bad ar_step is refused before any model call, and the progress knows
  // the total.
  std::vector<TimestepMatrix> matrices;
  int iterations = 0;
  for (size_t c = 0; c < chunks.size(); ++c) {
    matrices.push_back(chunk_matrix(chunks[c], c + 1 == chunks.size() ? end_frames : 0, frame_scheduler.timesteps(),
                                    options.ar_step, block));
    iterations += int(matrices.back().timesteps.size());
  }

  const Tensor forcing = Tensor::full({1}, 1.0, DType::boolean), fps = fps_input(options.fps, batch);
  const bool add_noise = options.addnoise_condition > 0;
  const int64_t prefix_timestep = int64_t(options.addnoise_condition);  // the pipeline's int64 timestep truncates
  WanGenerateResult result;
  std::vector<Tensor> clip;  // the clip's latent frames so far
  int64_t draw = 0;
  for (size_t c = 0; c < chunks.size(); ++c) {
    const SkyReelsChunk& chunk = chunks[c];
    const TimestepMatrix& matrix = matrices[c];
    Shape chunk_shape = shape;
    chunk_shape[2] = chunk.frames;
    const Tensor noise = draw_noise(options, draw++, chunk_shape);
    std::vector<Tensor> frame_latents;
    // The prefix: the first image's frames in the first chunk, the end of the clip so far in a later one.
    const std::vector<Tensor>& history = c == 0 ? first_image : clip;
    const int64_t prefix_start = c == 0 ? 0 : int64_t(clip.size()) - chunk.overlap;
    for (int64_t f = 0; f < chunk.frames; ++f)
      frame_latents.push_back(f < chunk.prefix ? history[size_t(prefix_start + f)] : noise.narrow(2, f, 1).contiguous());
    const bool last_chunk = c + 1 == chunks.size();
    if (last_chunk) frame_latents.insert(frame_latents.end(), last_image.begin(), last_image.end());
    // One scheduler per latent frame: each keeps its own multistep state and step count.
    std::vector<UniPCMultistepScheduler> schedulers(frame_latents.size(), frame_scheduler);

    run_steps(0, int(matrix.timesteps.size()), [&](int step) {
      const size_t i = size_t(step);
      const auto [first, end] = matrix.window[i];
      std::vector<Tensor> window(frame_latents.begin() + first, frame_latents.begin() + end);
      if (add_noise && first < chunk.prefix) {
        const Tensor prefix = cat({window.begin(), window.begin() + (chunk.prefix - first)}, 2);
        const Tensor noisy = noisy_prefix(prefix, draw_noise(options, draw++, prefix.shape()), options.addnoise_condition);
        for (int64_t f = first; f < chunk.prefix; ++f) window[size_t(f - first)] = noisy.narrow(2, f - first, 1);
      }
      const Tensor velocity = guided_prediction(
          model,
          {{"hidden_states", cat(window, 2)},
           {"timestep", window_timesteps(matrix.timesteps[i], first, end, batch, add_noise ? chunk.prefix : 0,
                                         prefix_timestep)},
           {"enable_diffusion_forcing", forcing},
           {"fps", fps}},
          prompt_embeds, video);
      for (int64_t f = first; f < end; ++f) {
        if (!matrix.update[i][size_t(f)]) continue;
        UniPCMultistepScheduler& s = schedulers[size_t(f)];
        // A frame steps once per timestep of the schedule, in order: its scheduler's own count says which.
        CPDIT_CHECK(s.step_index() < s.num_inference_steps() &&
                        s.timesteps()[size_t(s.step_index())] == matrix.timesteps[i][size_t(f)],
                    internal, "frame ", f, " is fed timestep ", matrix.timesteps[i][size_t(f)], " at its step ",
                    s.step_index());
        frame_latents[size_t(f)] =
            s.step_in_place(velocity.narrow(2, f - first, 1).contiguous(), frame_latents[size_t(f)]);
      }
    }, video.on_step, iterations, result.step_seconds);
    // The first chunk whole; a later one from the end of its overlap on; never the last image's frames.
    // (diffusers 0.42.1 cuts the last prefix's length off a long clip instead of the last image's.)
    clip.insert(clip.end(), frame_latents.begin() + chunk.overlap, frame_latents.end() - (last_chunk ? end_frames : 0));
  }
  result.latents = cat(clip, 2);
  return result;
}

}  // namespace cpdit::pipeline
