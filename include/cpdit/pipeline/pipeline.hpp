#pragma once
// Generation as a library object: a Pipeline is opened once from a diffusers pipeline folder, a
// transformer checkpoint or a preset, then runs any number of Requests (request.hpp) — other prompts,
// sizes, seeds, step counts, guidance, ranks — without reopening what it keeps. The command line, the
// Python package and the server are fronts over it: they turn flags, keywords or JSON into Requests and
// Results into files, arrays or HTTP answers.
//
// Every family runs through the same stages: encode (the prompt through the text encoders, on rank 0
// under mpirun), denoise (the family's loop on every rank, family.hpp) and decode (the VAE, split over
// the same ranks). A resident pipeline holds its text encoders, transformer(s), image encoder and VAE
// from open() on, each once in the process however many local ranks share it; a staged one opens each
// when its stage starts and frees it when the stage ends, so a run's peak is its largest stage.
#include <cpdit/pipeline/family.hpp>
#include <cpdit/pipeline/request.hpp>
#include <cpdit/pipeline/stages.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cpdit::pipeline {

// Where a pipeline comes from.
struct PipelineSource {
  std::string model;             // a pipeline folder, a transformer folder, an index json or a weights file
  std::string preset;            // or a built-in preset (presets.hpp); exactly one of the two, or neither
                                 // with a `transformer` file (then the model)
  std::string config;            // a transformer config.json overriding the checkpoint's
  // A transformer weights file (.safetensors, .gguf) run instead of the pipeline folder's transformer/,
  // with that folder's transformer/config.json unless `config` is given (diffusers' from_single_file
  // with config=): the folder's text encoders, scheduler and VAE around one file's weights.
  std::string transformer;
  // A VAE file (.safetensors: diffusers' names, FLUX.1's ae.safetensors or Wan 2.1's original names)
  // decoding instead of the folder's vae/, with `vae_config` when given, else the config its tensors'
  // shapes give (models/vae).
  std::string vae;
  std::string vae_config;
  // Text encoder files standing in for the folder's text_encoder*/ (or, with a transformer file alone,
  // the only text there is) and tokenizer folders for its tokenizer*/: TextComponents::with_files puts
  // each in the family's slot its class or kind fills.
  std::vector<TextEncoderFile> text_encoders;
  std::vector<std::string> tokenizers;
  std::string scheduler_config;  // a scheduler_config.json overriding the folder's (presets use their own)
  std::string dtype = "auto";    // the weights in memory (nn::load_options)
};

// resident: everything stays from open() on. staged: each stage loads and frees its models, every run.
// automatic: resident when the pipeline's weights fit in half of the memory available now, else staged.
enum class LoadPolicy { automatic, resident, staged };

class Pipeline {
 public:
  // Opens `source`: its family is known (and an unsupported class refused) before anything loads;
  // resident, every component is loaded here, as stage "load" of `log` when one is given. Under mpirun
  // every process must open the same model files (checked here).
  static Pipeline open(const PipelineSource& source, LoadPolicy policy = LoadPolicy::automatic,
                       StageLog* log = nullptr);

  // One generation on local ranks or, under mpirun, on the MPI processes, its stages logged in `stages`.
  // Thread-compatible: one run at a time per pipeline.
  Result run(Request request, StageLog& stages) const;

  // What run() refuses before it reads any weights — the request against the family and the folder
  // (sizes given, options the family does not take, the scheduler, the VAE and text a run needs) —
  // refused the same way, so a dry run (`--dry-run`) is told what a run would be; a resident pipeline
  // also refuses what its transformer tells (sizes, the family's options, a run that cannot fit in
  // memory), so a server refuses such a request before it queues it. Returns the request with the
  // defaults known without weights filled in (--cfg-scale routed, the text length).
  Request check(Request request) const;

  const Family& family() const;
  bool resident() const;
  bool has_vae() const;
  // The pipeline's VAE, for a caller that decodes itself (Python's pipe.vae; vae_decode.hpp): the one
  // kept when resident, else opened now. Refused when the pipeline has none.
  models::LoadedModel vae() const;
  bool has_text_encoders() const;
  const PipelineSource& source() const;
  // "preset flux-tiny" or the model path.
  std::string name() const;

 private:
  struct State;
  explicit Pipeline(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

// This process prints and writes: the only one, or rank 0 of an mpirun launch.
bool lead_process();

}  // namespace cpdit::pipeline
