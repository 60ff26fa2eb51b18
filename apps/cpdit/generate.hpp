#pragma once
// The generate job in memory: every stage of `cpdit generate` (encode, denoise, decode) up to, not
// including, writing its outputs. The command line writes what it returns; the Python package
// (python/) hands it back as arrays, so both run the same code.
#include "parallel_flags.hpp"

#include <cpdit/core/tensor.hpp>
#include <cpdit/nn/module.hpp>
#include <cpdit/pipeline/pipeline_table.hpp>
#include <cpdit/pipeline/stages.hpp>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cpdit::app {

struct GenerateArgs {
  std::string model, preset, config, scheduler_config, embeddings, latents, out, preview, dtype = "auto";
  std::optional<std::string> prompt, negative_prompt;
  std::string image, frames_dir, video;  // decoded outputs: PNG per batch item, PNG frames of a video, MP4
  int steps = 0;
  int64_t height = 0, width = 0, frames = 0, text_tokens = 0;  // text_tokens 0: the pipeline's max_sequence_length
  int64_t ar_step = 0;  // SkyReels-V2 diffusion forcing
  std::string first_image, last_image;  // image-to-video (Wan 2.1, SkyReels-V2): PNG files
  std::string init_image;                // FLUX.1 image-to-image: a PNG file
  std::optional<double> strength;        // its share of the schedule run (default 0.6)
  // SkyReels-V2's fps input (default 24), LTX-Video's RoPE time scale (default 25), and the --video frame rate
  std::optional<int64_t> fps;
  int64_t base_num_frames = 97;  // SkyReels-V2 long video
  std::optional<int64_t> overlap_history;
  double addnoise_condition = 0;
  float decode_timestep = 0.0f;  // LTX-Video's timestep-conditioned VAE
  std::optional<float> decode_noise_scale;
  models::vae::VideoSplit vae_split = models::vae::VideoSplit::rows;
  uint64_t seed = 0;
  float guidance = std::nanf("");  // unset: the pipeline's default
  float guidance_2 = std::nanf("");  // Wan 2.2's low-noise expert (guidance_scale_2); unset: guidance
  float true_cfg_scale = std::nanf("");  // unset: FLUX.1 1.0 (off), Qwen-Image 4.0
  bool json = false;
  bool check_finite = false;
  ParallelFlags parallel;
  // In memory instead of the --embeddings and --latents files (the Python package's prompt_embeds=
  // and latents=): the embeddings by their file names, the initial noise in the pipeline's layout.
  nn::TensorMap embedding_tensors;
  Tensor initial_latents;
  bool decode = false;  // decode the latents even when no output file asks for pixels
};

// What one denoising loop measured, whichever model ran it.
struct LoopStats {
  std::vector<double> step_seconds;
  bool latents_sharded = false;  // FLUX.1: latents split between steps, gathered once at the end
  double gather_seconds = 0;
  int64_t gather_bytes = 0;
};

// What generate reports about its model, known once the denoise stage has opened it.
struct RunInfo {
  std::string name;
  pipeline::PipelineKind pipeline = pipeline::PipelineKind::flux;
  RankLayout layout;
};

struct Generation {
  RunInfo info;
  Tensor latents;  // the final latents in the pipeline's layout (rank 0's; each process's own under mpirun)
  // The decoded pixels in [0, 1] when an output or `decode` asked: (B, H, W, 3) images or (B, F, H, W, 3)
  // video; undefined otherwise.
  Tensor pixels;
  LoopStats loop;
  std::vector<int64_t> peaks;  // each rank's activation peak during the loop
};

// This process prints and writes: the only one, or rank 0 of an mpirun launch.
bool lead_process();

// The pipelines that make video: Wan 2.1, SkyReels-V2 (a Wan 2.1 network) and LTX-Video.
bool video_pipeline(pipeline::PipelineKind kind);

// The clip's frame rate: --fps when given, else the rate the pipeline makes (SkyReels-V2's default
// fps input 24, LTX-Video's 25, Wan's 16). SkyReels-V2's fps embedding and LTX-Video's RoPE time
// scale read it too, so the MP4 plays at the rate the model was told.
int64_t frame_rate(const GenerateArgs& args, pipeline::PipelineKind kind);

// Runs the stages of a generation on local ranks or, under mpirun, on the MPI processes, logging
// them in `stages`; fills in the defaults `args` left open (steps, sizes, frames).
Generation generate(GenerateArgs& args, pipeline::StageLog& stages);

}  // namespace cpdit::app
