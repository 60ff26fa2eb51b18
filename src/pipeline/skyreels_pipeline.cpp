#include <cpdit/core/error.hpp>
#include <cpdit/pipeline/skyreels_pipeline.hpp>

#include <algorithm>
#include <chrono>

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

// The timesteps of `row` for frames [first, end), expanded over the batch: (B, end - first) I64.
Tensor window_timesteps(const std::vector<int64_t>& row, int64_t first, int64_t end, int64_t batch) {
  std::vector<float> values;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t f = first; f < end; ++f) values.push_back(float(row[size_t(f)]));  // <= 999: exact in f32
  return Tensor::from_vector(values, {batch, end - first}).to(DType::i64);
}

}  // namespace

WanGenerateResult generate_skyreels_v2(const nn::Model& model, const models::skyreels_v2::SkyReelsV2Config& config,
                                       const UniPCConfig& scheduler, const Tensor& prompt_embeds,
                                       const SkyReelsGenerateOptions& options) {
  const WanGenerateOptions& video = options.video;
  CPDIT_CHECK(video.steps >= 1, invalid_argument, "steps must be at least 1, got ", video.steps);
  const int64_t batch = prompt_embeds.size(0);
  const Tensor latents =
      initial_wan_latents(wan_latent_shape(config, batch, video.frames, video.height, video.width, video.vae), video);
  const int64_t frames = latents.size(2), block = config.num_frame_per_block;
  CPDIT_CHECK(frames % block == 0, invalid_argument, frames, " latent frames (", video.frames,
              " frames) do not split into the model's blocks of num_frame_per_block = ", block, " latent frames");

  UniPCMultistepScheduler frame_scheduler(scheduler);
  frame_scheduler.set_timesteps(video.steps);
  // One scheduler per latent frame: each keeps its own multistep state and step count.
  std::vector<UniPCMultistepScheduler> schedulers(size_t(frames), frame_scheduler);
  std::vector<Tensor> frame_latents;
  for (int64_t f = 0; f < frames; ++f) frame_latents.push_back(latents.narrow(2, f, 1).contiguous());
  const TimestepMatrix matrix =
      generate_timestep_matrix(frames, frame_scheduler.timesteps(), frames, options.ar_step, 0, block);

  const Tensor forcing = Tensor::full({1}, 1.0, DType::boolean), fps = fps_input(options.fps, batch);
  WanGenerateResult result;
  const int iterations = int(matrix.timesteps.size());
  for (int i = 0; i < iterations; ++i) {
    auto start = std::chrono::steady_clock::now();
    const auto [first, end] = matrix.window[size_t(i)];
    const std::vector<Tensor> window(frame_latents.begin() + first, frame_latents.begin() + end);
    const Tensor velocity = guided_prediction(
        model,
        {{"hidden_states", cat(window, 2)},
         {"timestep", window_timesteps(matrix.timesteps[size_t(i)], first, end, batch)},
         {"enable_diffusion_forcing", forcing},
         {"fps", fps}},
        prompt_embeds, video);
    for (int64_t f = first; f < end; ++f) {
      if (!matrix.update[size_t(i)][size_t(f)]) continue;
      UniPCMultistepScheduler& s = schedulers[size_t(f)];
      // A frame steps once per timestep of the schedule, in order: its scheduler's own count says which.
      CPDIT_CHECK(s.step_index() < s.num_inference_steps() &&
                      s.timesteps()[size_t(s.step_index())] == matrix.timesteps[size_t(i)][size_t(f)],
                  internal,
                  "frame ", f, " is fed timestep ", matrix.timesteps[size_t(i)][size_t(f)], " at its step ",
                  s.step_index());
      frame_latents[size_t(f)] =
          s.step_in_place(velocity.narrow(2, f - first, 1).contiguous(), frame_latents[size_t(f)]);
    }
    result.step_seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (video.on_step) video.on_step(i, iterations, result.step_seconds.back());
  }
  result.latents = cat(frame_latents, 2);
  return result;
}

}  // namespace cpdit::pipeline
