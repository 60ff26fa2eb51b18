#include <cpdit/comm/launch.hpp>
#include <cpdit/comm/tensor_ops.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/core/memory.hpp>
#include <cpdit/core/threads.hpp>
#include <cpdit/core/weight.hpp>
#include <cpdit/io/model_files.hpp>
#include <cpdit/pipeline/preset_pipelines.hpp>
#include <cpdit/pipeline/presets.hpp>
#include <cpdit/pipeline/stages.hpp>
#include <cpdit/pipeline/vae_decode.hpp>

#include <algorithm>
#include <exception>
#include <mutex>

namespace cpdit::pipeline {

void StageLog::begin(const std::string& name) {
  if (on_begin) on_begin(name);
  stages_.push_back(StageStats{name});
  // The last stage's blocks (its model's weights and activations) are not the sizes this one asks for.
  memory::release_cache();
  weight_memory_counter().reset_peak();
  memory::reset_peak();
  thread_base_ = memory::current_bytes();
  rank_peaks_ = 0;
  rank_reports_ = 0;
  start_ = std::chrono::steady_clock::now();
}

void StageLog::end() {
  StageStats& s = stages_.back();
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  s.weight_bytes = weight_memory_counter().peak();
  s.weight_bytes_after = weight_memory_counter().current();
  // Ranks report what they held while they ran (local rank threads have counters of their own); a
  // stage without ranks ran on this thread. This thread's counter is not added to the ranks': it also
  // charged the tensors that became the stage's weights before they moved to the weight counter.
  s.activation_bytes = rank_reports_ > 0 ? rank_peaks_.load() : memory::peak_bytes() - thread_base_;
  if (on_end) on_end(s);
}

void StageLog::add_rank_peak(int64_t bytes) {
  rank_peaks_ += bytes;
  ++rank_reports_;
}

int64_t StageLog::peak_bytes() const {
  int64_t peak = 0;
  for (const StageStats& s : stages_) peak = std::max(peak, s.weight_bytes + s.activation_bytes);
  return peak;
}

namespace {

// Runs fn on rank 0 of `world` only; an error it throws there is thrown on every rank, with the same
// kind and message, so that no rank waits for what rank 0 will never send.
void run_on_root(comm::Communicator& world, const std::function<void()>& fn) {
  int32_t kind = -1;  // none: fn succeeded
  std::string message;
  if (world.rank() == 0) {
    try {
      fn();
    } catch (const Error& e) {
      kind = int32_t(e.kind());
      message = e.what();
    } catch (const std::exception& e) {
      kind = int32_t(ErrorKind::internal);
      message = e.what();
    }
  }
  world.broadcast(&kind, sizeof kind, 0);
  if (kind < 0) return;
  comm::broadcast_bytes(world, message, 0);
  throw Error(ErrorKind(kind), message);
}

}  // namespace

PipelineParts PipelineParts::of_folder(const std::string& path) {
  PipelineParts parts;
  if (TextComponents::folder_has_encoders(path)) parts.text = TextComponents::from_folder(path);
  if (const std::optional<std::string> vae = io::pipeline_component(path, "vae"))
    parts.vae = [folder = *vae] { return models::open_model(folder, std::nullopt, {}); };
  if (const std::optional<std::string> encoder = io::pipeline_component(path, "image_encoder"))
    parts.image_encoder = [folder = *encoder] { return models::open_model(folder, std::nullopt, {}); };
  if (const std::optional<std::string> processor = io::pipeline_component(path, "image_processor"))
    parts.image_processor = *processor + "/preprocessor_config.json";
  return parts;
}

PipelineParts PipelineParts::of_preset(const std::string& name) {
  PipelineParts parts;
  parts.text = preset_text_components(name, kPresetWeightsSeed ^ 0x7e87ull);
  parts.vae = [name] { return preset_vae(name, kPresetWeightsSeed ^ 0xfaeull); };
  return parts;
}

nn::TensorMap made_on_rank0(const std::function<nn::TensorMap()>& make, comm::Communicator* world) {
  if (world == nullptr) return make();
  nn::TensorMap made;
  run_on_root(*world, [&] { made = make(); });
  comm::broadcast_tensors(*world, made, 0);
  return made;
}

nn::TensorMap encode_stage(StageLog& log, const std::function<nn::TensorMap()>& encode, int threads,
                           comm::Communicator* world) {
  return log.run("encode", [&] {
    ScopedComputeThreads budget(threads);
    return made_on_rank0(encode, world);
  });
}

Tensor decode_stage(StageLog& log, const std::function<models::LoadedModel()>& open_vae, const Tensor& latents,
                    int ranks, const comm::LocalOptions& local, const DecodeTimestep& ltx,
                    models::vae::VideoSplit split) {
  return log.run("decode", [&] {
    const models::LoadedModel vae = open_vae();
    Tensor sample;
    std::mutex kept;
    comm::run_ranks(ranks, [&](comm::Communicator& world) {
      memory::reset_peak();
      Tensor mine = decode_latents(vae, latents, world, ltx, split);
      log.add_rank_peak(memory::peak_bytes());
      // Local ranks share this process: rank 0's copy is kept. Under mpirun each process keeps its own.
      if (world.rank() != 0 && !comm::launched_by_mpi()) return;
      std::lock_guard<std::mutex> lock(kept);
      sample = mine;
    }, local);
    // An mpirun process beyond the latent's rows took no part (and writes nothing).
    return sample.defined() ? postprocess_pixels(sample) : Tensor();
  });
}

}  // namespace cpdit::pipeline
