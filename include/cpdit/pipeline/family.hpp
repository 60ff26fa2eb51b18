#pragma once
// The pipeline families (FLUX.1, Wan, SkyReels-V2, Qwen-Image, LTX-Video) as one registry: each entry
// holds all that tells its family apart — the transformer class it runs, its presets, its defaults, its
// scheduler and VAE factors, its checks, its memory estimate and its denoising loop — so Pipeline
// (pipeline.hpp) runs every family through the same stages without asking which one it is.
#include <cpdit/comm/mesh.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/models/registry.hpp>
#include <cpdit/parallel/plan.hpp>
#include <cpdit/pipeline/flow_match_euler.hpp>
#include <cpdit/pipeline/ltx_pipeline.hpp>
#include <cpdit/pipeline/request.hpp>
#include <cpdit/pipeline/stages.hpp>
#include <cpdit/pipeline/step_loop.hpp>
#include <cpdit/pipeline/unipc.hpp>
#include <cpdit/pipeline/wan_pipeline.hpp>

#include <nlohmann/json.hpp>

#include <any>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cpdit::pipeline {

// Where a pipeline's files are, as the family reads them when its transformer opens.
struct PipelineFolder {
  std::string model;             // --model: a pipeline folder, a transformer folder or file; empty for a preset
  std::string preset;            // a preset's name; empty otherwise
  std::string scheduler_config;  // the scheduler_config.json given or the folder's; empty: none
  // The VAE's config: vae/config.json's, or what --vae's file gives (its config.json or its shapes);
  // null: no VAE config is known.
  nlohmann::json vae_config;
  std::string vae_source;        // where vae_config was read, for errors
};

// The opened transformer (and Wan 2.2's low-noise expert) with what its family read beside it.
struct Transformer {
  models::LoadedModel model;
  std::optional<models::LoadedModel> low_noise;  // Wan 2.2 A14B: transformer_2/, below boundary_timestep
  double boundary_timestep = 0;
  int64_t vae_scale_factor = 8;  // pixels per latent, from the folder's vae/ when it has one
  WanVaeFactors wan_vae;
  LtxVaeFactors ltx_vae;
  // The scheduler_config.json to use (FLUX.1, Qwen-Image, LTX-Video: flow-match Euler; Wan, SkyReels-V2:
  // UniPC); empty: the family's released default, which may depend on the request (SkyReels-V2 I2V).
  std::string scheduler_file;
  std::string name;    // "preset flux-tiny" or the --model path
  std::string preset;  // the preset's name (its own scheduler); empty otherwise
};

// One rank's part of a run: its communicator over every rank, its (cfg, ring, Ulysses) mesh, its replica
// of the transformer(s) with parallelism enabled, and the hook every step ends with (the NaN watch,
// cancellation agreed over the ranks, progress and the step callback on rank 0).
struct RankRun {
  comm::Communicator& world;
  comm::Mesh mesh;
  std::unique_ptr<nn::Model> model;
  std::unique_ptr<nn::Model> low_noise;
  StepHook on_step;
};

// One rank's denoising loop; returns the full latents (every rank) and what it measured.
using RankLoop = std::function<std::pair<Tensor, LoopStats>(RankRun& run)>;

// What a family's loop is made from, before any rank starts.
struct LoopInputs {
  const Request& request;
  const Transformer& transformer;
  const parallel::RankLayout& layout;
  const nn::TensorMap& text;  // the encode stage's output or the given embeddings; empty: random
  const PipelineParts& parts;  // the VAE and image encoder, for input images
  std::string model;           // the --model path or "preset NAME", for errors
};

struct FamilyDefaults {
  int steps = 50;
  int64_t height = 1024, width = 1024, frames = 0;  // frames 0: an image family
  int64_t preset_frames = 0;                        // a video preset's
  int64_t text_tokens = 512;                        // max_sequence_length

  // A preset's (random weights, so small and quick): 4 steps at 256x256, the preset's clip length.
  FamilyDefaults of_preset() const { return {4, 256, 256, preset_frames, preset_frames, text_tokens}; }
};

class Family {
 public:
  virtual ~Family() = default;
  virtual std::string name() const = 0;               // "flux": the Python result's "pipeline"
  virtual std::string transformer_class() const = 0;  // "FluxTransformer2DModel"
  virtual std::string preset_prefix() const = 0;      // "flux-"
  // The diffusers pipelines (model_index.json's _class_name) the family runs: "FluxPipeline", ...
  virtual std::vector<std::string> pipeline_classes() const = 0;
  virtual FamilyDefaults defaults() const = 0;
  // The defaults of a transformer file run with no pipeline folder, by its config (which the tensors
  // tell): FLUX.1-schnell-like (no guidance embedding) runs as schnell's model card says.
  virtual FamilyDefaults file_defaults(const nlohmann::json& /*transformer_config*/) const { return defaults(); }
  bool video() const { return defaults().frames > 0; }
  virtual bool takes_init_image() const { return false; }  // image-to-image (FLUX.1, Qwen-Image)
  virtual bool has_preview() const { return false; }       // a latent-to-RGB preview (FLUX.1)
  virtual bool takes_first_image() const { return false; }  // image-to-video (Wan, SkyReels-V2)
  virtual bool takes_decode_timestep() const { return false; }  // a timestep-conditioned VAE (LTX-Video)
  // The latents' layout, as the --out file's metadata says it.
  virtual std::string latents_layout() const = 0;
  // Its scheduler in words, as a picture's parameters name it: "flow-match Euler", "UniPC".
  virtual std::string scheduler_name() const = 0;
  // The --scheduler names it takes (make_scheduler.hpp), its default first.
  virtual std::vector<std::string> scheduler_choices() const = 0;
  // The clip's frame rate: the request's fps, else the rate the pipeline makes.
  virtual int64_t frame_rate(const Request& request) const { return request.fps.value_or(kWanFramesPerSecond); }

  // The text encoders its pipeline folders hold (tokenizer and encoder folders, classes), and the prompt
  // through them as the pipeline's encode_prompt returns it (prompt_encoding.hpp).
  virtual std::vector<TextSlot> text_slots() const = 0;
  virtual nn::TensorMap encode_prompt(const TextComponents& components, const PromptEncoding& request) const;

  // The family's reading of the folder when its transformer opens (`t.model` is open): the VAE's factors,
  // a second expert.
  virtual void configure(Transformer& t, const PipelineFolder& folder, const nn::LoadOptions& load) const = 0;
  // Refuses what the family cannot run whatever the model, before anything is encoded or opened.
  virtual void check_request(const Request&, const PipelineFolder&) const {}
  // Refuses what the family cannot run (its own flags, its image inputs), after the defaults are filled.
  virtual void check(const Request&, const Transformer&) const {}
  // The guidance scales the request left unset (NaN), as the family's diffusers pipeline defaults them,
  // so the loop and the Result (a picture's parameters, the summary) read what ran.
  virtual void fill_guidance(Request&, const Transformer&) const {}
  // Refuses a run that cannot fit in memory (check_generate_fits), before any rank starts.
  virtual void check_fits(const Request& request, const Transformer& t) const = 0;
  // The plan the ranks enable on their replicas (null: the model's own).
  virtual std::optional<parallel::ContextParallelPlan> plan() const { return std::nullopt; }
  // The loop every rank runs; what it needs from the request is taken (and checked) here, once.
  virtual RankLoop loop(const LoopInputs& in) const = 0;
  // Whether its forward runs its blocks through nn::run_blocks, so that a step cache applies.
  virtual bool takes_step_cache() const { return false; }
  // MagCache's per-step ratios for the family's released checkpoints (FLUX.1: diffusers' FLUX_MAG_RATIOS);
  // empty: none known, a run must calibrate or give them.
  virtual std::vector<float> mag_ratios() const { return {}; }
  // The modules TaylorSeer hooks when the request names none (diffusers' attention patterns).
  virtual std::vector<std::string> taylor_seer_modules() const { return nn::taylor_seer_default_modules(); }
  // The decoded pixels as the pipeline returns them (Qwen-Image: its one frame).
  virtual Tensor pixels(const Tensor& decoded) const { return decoded; }
};

// The config of a model a family runs, as the config type of the class it was written for.
template <class Config>
const Config& config_of(const models::LoadedModel& model) {
  const Config* config = std::any_cast<Config>(&model.config);
  CPDIT_CHECK(config, internal, "the pipeline for ", model.class_name, " was given another model's config");
  return *config;
}

// The registered families.
const std::vector<const Family*>& families();
// The family that runs a transformer class; a class no family runs is refused naming those that run.
const Family& family_for_class(const std::string& transformer_class);
// The family that runs a diffusers pipeline class; one no family runs is refused naming those that run.
const Family& family_for_pipeline(const std::string& pipeline_class);
// The family of a preset (check_preset refuses unknown names).
const Family& family_for_preset(const std::string& preset);

// The families' shared pieces.
// The options every loop takes alike (steps, size, seed, frames for video, the initial latents, the
// step hook).
template <class Options>
void set_loop_options(Options& options, const Request& r, RankRun& run) {
  options.steps = r.steps;
  if constexpr (requires { options.frames; }) options.frames = r.frames;
  options.height = r.height;
  options.width = r.width;
  options.seed = r.seed;
  options.initial_latents = r.initial_latents;
  options.on_step = run.on_step;
}
// Why a --cfg-parallel 2 layout cannot split a loop's two guidance passes, when it cannot.
const char* no_guidance_reason(bool has_negative, const char* scale_flag_at_most_1);
// Where the text embeddings came from, for errors.
std::string text_source(const Request& r);

}  // namespace cpdit::pipeline
