#pragma once
// The stages of a generation — encode (prompt to embeddings), denoise (the transformer loop), decode
// (the VAE) — take turns with memory: each loads its model when it starts and frees it before the
// next one starts, so a run's peak is its largest stage, not the sum. StageLog runs them in turn and
// records the time and memory of each.
#include <cpdit/comm/local.hpp>
#include <cpdit/models/registry.hpp>
#include <cpdit/nn/module.hpp>
#include <cpdit/pipeline/prompt_encoding.hpp>
#include <cpdit/pipeline/vae_decode.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace cpdit::pipeline {

struct StageStats {
  std::string name;
  double seconds = 0;
  int64_t weight_bytes = 0;        // the most model-weight bytes this process held during the stage
  int64_t weight_bytes_after = 0;  // held when it ended: what it left loaded for later stages
  // The activation peaks of this process's ranks during the stage, summed (an upper bound of what
  // they held at once).
  int64_t activation_bytes = 0;
};

class StageLog {
 public:
  std::function<void(const std::string&)> on_begin;  // the stage's name, as it starts (a server's job status)
  std::function<void(const StageStats&)> on_end;  // e.g. to name the stage in a progress line
  std::function<void(const std::string&)> on_warning;  // advice that does not stop the run; unset: dropped

  // Passes a non-empty warning to on_warning.
  void warn(const std::string& message) const {
    if (on_warning && !message.empty()) on_warning(message);
  }

  // Runs body() as stage `name` on this thread and returns what it returns. Rank threads started
  // inside it (each with its own memory counter) report their activation peaks with add_rank_peak.
  template <class Body>
  auto run(const std::string& name, Body&& body) -> decltype(body()) {
    begin(name);
    if constexpr (std::is_void_v<decltype(body())>) {
      body();
      end();
    } else {
      auto result = body();
      end();
      return result;
    }
  }

  // Any thread, inside a stage: a rank's activation peak while it ran (after the stage's weights
  // were loaded). A stage where no rank reports is measured on the calling thread.
  void add_rank_peak(int64_t bytes);
  const std::vector<StageStats>& stages() const { return stages_; }
  // Weights plus activations of the largest stage.
  int64_t peak_bytes() const;

 private:
  void begin(const std::string& name);
  void end();

  std::vector<StageStats> stages_;
  std::chrono::steady_clock::time_point start_;
  int64_t thread_base_ = 0;  // this thread's activation bytes when the stage began
  std::atomic<int64_t> rank_peaks_{0};
  std::atomic<int> rank_reports_{0};
};

// What the encode and decode stages load, wherever the pipeline comes from. Nothing is loaded until a
// stage asks.
struct PipelineParts {
  std::optional<TextComponents> text;        // none: no text encoders (embeddings must be given)
  std::function<models::LoadedModel()> vae;  // empty: no VAE (the run ends at latents)
  // Image-to-video's CLIP (Wan 2.1, SkyReels-V2): image_encoder/ and image_processor/preprocessor_config.json;
  // empty: none.
  std::function<models::LoadedModel()> image_encoder;
  std::string image_processor;

  // A diffusers pipeline folder: its tokenizer*/ and text_encoder*/ when it has them, its vae/, its
  // image_encoder/ and image_processor/.
  // Any other path (a transformer folder or file) has neither.
  static PipelineParts of_folder(const std::string& path);
  // A preset's seeded random text encoders and VAE (preset_pipelines.hpp), each drawn from its own
  // stream of kPresetWeightsSeed (presets.hpp); none for a preset without them (qwen-*).
  static PipelineParts of_preset(const std::string& name);
};

// `make` on rank 0 of `world` alone, its tensors broadcast to every rank; an error there is thrown on
// every rank, as the same cpdit::Error, so no rank waits for tensors that will not come (within the
// communicator's timeout, CPDIT_COMM_TIMEOUT_S). Null `world`: make() here.
nn::TensorMap made_on_rank0(const std::function<nn::TensorMap()>& make, comm::Communicator* world);

// The encode stage: `encode` (the prompt through the text encoders, each loaded, run and freed in
// turn) on this thread with `threads` compute threads. Local ranks share their process's one result.
// Under mpirun (`world`: the processes) only world rank 0 runs `encode` and every other process
// receives each tensor it made, so they never open the tokenizer or text encoder files; they wait
// for it within the communicator's timeout (CPDIT_COMM_TIMEOUT_S). An error on rank 0 is thrown on
// every process, as the same cpdit::Error.
nn::TensorMap encode_stage(StageLog& log, const std::function<nn::TensorMap()>& encode, int threads,
                           comm::Communicator* world = nullptr);

// The decode stage: the VAE loaded, `latents` decoded split over `ranks` local ranks (or the
// processes of an mpirun launch) by rows, or by frames (`split`, decode_latents), the VAE freed;
// returns the pixels as postprocess_pixels makes them: (B, H, W, 3) or (B, F, H, W, 3) in [0, 1]
// (undefined on an mpirun process beyond the latent's row count, which took no part). `ltx`:
// LTX-Video's decode timestep (decode_latents).
Tensor decode_stage(StageLog& log, const std::function<models::LoadedModel()>& open_vae, const Tensor& latents,
                    int ranks, const comm::LocalOptions& local, const DecodeTimestep& ltx = {},
                    models::vae::VideoSplit split = models::vae::VideoSplit::rows);

}  // namespace cpdit::pipeline
