// cpdit generate: a prompt to a FLUX.1 or Qwen-Image image or a Wan or LTX-Video video across ranks, on a pipeline folder, a
// transformer checkpoint or a built-in preset, in stages (pipeline/stages.hpp): encode, the denoising
// loop, decode.
// Only rank 0 prints and writes files; outputs are written at the end and appear together
// (io::OutputBatch), so a failed run leaves nothing behind and every old output as it was.
#include "command.hpp"
#include "finite_watch.hpp"
#include "generate.hpp"
#include "memory_check.hpp"
#include "mpi_arguments.hpp"
#include "output_paths.hpp"
#include "option_checks.hpp"
#include "parallel_flags.hpp"
#include "progress.hpp"
#include "vae_split_option.hpp"
#include "weight_flags.hpp"

#include <cpdit/comm/launch.hpp>
#include <cpdit/comm/mesh.hpp>
#include <cpdit/comm/mpi.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/core/memory.hpp>
#include <cpdit/core/threads.hpp>
#include <cpdit/io/atomic_file.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/io/model_files.hpp>
#include <cpdit/io/png.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/io/video.hpp>
#include <cpdit/models/registry.hpp>
#include <cpdit/pipeline/flux_pipeline.hpp>
#include <cpdit/pipeline/latents.hpp>
#include <cpdit/pipeline/ltx_pipeline.hpp>
#include <cpdit/pipeline/picture_files.hpp>
#include <cpdit/pipeline/pipeline_table.hpp>
#include <cpdit/pipeline/preview.hpp>
#include <cpdit/pipeline/presets.hpp>
#include <cpdit/pipeline/qwenimage_pipeline.hpp>
#include <cpdit/pipeline/skyreels_pipeline.hpp>
#include <cpdit/pipeline/stages.hpp>
#include <cpdit/pipeline/wan_pipeline.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>

namespace cpdit::app {
namespace {

namespace fs = std::filesystem;


// Wan 2.1 and SkyReels-V2 (a Wan 2.1 network): frames, the Wan VAE, UniPC.
bool wan_family(pipeline::PipelineKind kind) {
  return kind == pipeline::PipelineKind::wan || kind == pipeline::PipelineKind::skyreels_v2;
}

// The pipelines that make video: the Wan family and LTX-Video.
bool video_pipeline(pipeline::PipelineKind kind) {
  return wan_family(kind) || kind == pipeline::PipelineKind::ltx_video;
}

int64_t ltx_frame_rate(const GenerateArgs& args) { return args.fps.value_or(pipeline::kLtxFramesPerSecond); }

// The transformer, the pipeline that runs its class, its scheduler, and where they came from.
struct Source {
  models::LoadedModel model;
  // Pixels (and Wan frames) per latent, from the pipeline folder's vae/ when it has one.
  int64_t vae_scale_factor = 8;
  pipeline::WanVaeFactors wan_vae;
  pipeline::LtxVaeFactors ltx_vae;
  pipeline::PipelineKind pipeline = pipeline::PipelineKind::flux;
  pipeline::FlowMatchEulerConfig flux_scheduler;  // FLUX.1, Qwen-Image and LTX-Video
  pipeline::UniPCConfig wan_scheduler;
  std::string name;
};

// The Wan 2.1 fields of a video model's config (SkyReels-V2's adds its own).
const models::wan::WanConfig& video_config(const Source& source) {
  if (source.pipeline == pipeline::PipelineKind::skyreels_v2)
    return pipeline::config_of<models::skyreels_v2::SkyReelsV2Config>(source.model);
  return pipeline::config_of<models::wan::WanConfig>(source.model);
}

Source open_source(const GenerateArgs& args, const nn::LoadOptions& load) {
  CPDIT_CHECK(args.model.empty() != args.preset.empty(), invalid_argument,
              "give exactly one of --model DIR|FILE and --preset NAME");
  Source s;
  if (!args.preset.empty()) {
    s.name = "preset " + args.preset;
    pipeline::check_preset(args.preset);
    // Qwen-Image's schedule refuses one step: refused here, before the preset's weights are built.
    if (args.preset.rfind("qwen-", 0) == 0) {
      s.flux_scheduler = pipeline::FlowMatchEulerConfig::qwenimage();
      s.flux_scheduler.check_steps(args.steps);
    }
    s.model = pipeline::preset_model(args.preset, args.seed ^ 0x5eedull, load);
    s.pipeline = pipeline::pipeline_for(s.model.class_name);
    if (s.pipeline == pipeline::PipelineKind::flux) s.flux_scheduler = pipeline::flux_preset_scheduler(args.preset);
    else if (s.pipeline == pipeline::PipelineKind::ltx_video) s.flux_scheduler = pipeline::FlowMatchEulerConfig::ltx_video();
    else if (s.pipeline != pipeline::PipelineKind::qwenimage) s.wan_scheduler = pipeline::video_preset_scheduler(args.preset);
    return s;
  }
  // A diffusers pipeline folder holds transformer/ and scheduler/; otherwise the path is the
  // transformer itself (a folder or a single file).
  CPDIT_CHECK(fs::exists(args.model), invalid_argument, "--model ", args.model, " does not exist");
  const std::optional<std::string> scheduler_folder = io::pipeline_component(args.model, "scheduler");
  const fs::path scheduler = !args.scheduler_config.empty() ? fs::path(args.scheduler_config)
                             : scheduler_folder         ? fs::path(*scheduler_folder) / "scheduler_config.json"
                                                        : fs::path();
  const bool has_scheduler = !scheduler.empty() && fs::is_regular_file(scheduler);
  s.name = args.model;
  s.model = models::open_model(args.model, args.config.empty() ? std::nullopt : std::optional(args.config), load);
  s.pipeline = pipeline::pipeline_for(s.model.class_name);
  // Without a scheduler config: Wan 2.1's flow_shift 3, SkyReels-V2's 8 (T2V) or 5 (I2V).
  if (wan_family(s.pipeline))
    s.wan_scheduler = has_scheduler ? pipeline::UniPCConfig::from_file(scheduler.string())
                      : s.pipeline == pipeline::PipelineKind::skyreels_v2
                          ? pipeline::UniPCConfig::wan21(pipeline::skyreels_flow_shift(video_config(s)))
                          : pipeline::UniPCConfig::wan21(3.0);
  else if (has_scheduler)
    s.flux_scheduler = pipeline::FlowMatchEulerConfig::from_file(scheduler.string());
  else
    s.flux_scheduler = s.pipeline == pipeline::PipelineKind::qwenimage   ? pipeline::FlowMatchEulerConfig::qwenimage()
                       : s.pipeline == pipeline::PipelineKind::ltx_video ? pipeline::FlowMatchEulerConfig::ltx_video()
                                                                         : pipeline::FlowMatchEulerConfig::flux_dev();
  const std::optional<std::string> vae_folder = io::pipeline_component(args.model, "vae");
  const fs::path vae_config = vae_folder ? fs::path(*vae_folder) / "config.json" : fs::path();
  if (s.pipeline == pipeline::PipelineKind::flux && fs::is_regular_file(vae_config))
    s.vae_scale_factor = pipeline::kl_vae_scale_factor(io::read_json(vae_config.string()), vae_config.string());
  if (wan_family(s.pipeline) && fs::is_regular_file(vae_config))
    s.wan_vae = pipeline::WanVaeFactors::from_json(io::read_json(vae_config.string()));
  if (s.pipeline == pipeline::PipelineKind::qwenimage && fs::is_regular_file(vae_config))
    s.vae_scale_factor = pipeline::qwenimage_vae_scale_factor(io::read_json(vae_config.string()), vae_config.string());
  if (s.pipeline == pipeline::PipelineKind::ltx_video && fs::is_regular_file(vae_config))
    s.ltx_vae = pipeline::LtxVaeFactors::from_json(io::read_json(vae_config.string()));
  return s;
}

// The initial noise, in the pipeline's own layout (the loop checks the shape): given in memory, else
// the tensor `latents` of --latents; undefined when neither (the loop seeds it).
Tensor initial_latents(const GenerateArgs& args) {
  if (args.initial_latents.defined() || args.latents.empty()) return args.initial_latents;
  io::SafetensorsFile file = io::SafetensorsFile::open(args.latents);
  CPDIT_CHECK(file.contains("latents"), invalid_argument, args.latents, " has no tensor 'latents' (the initial noise)");
  return file.get("latents").to(DType::f32);
}

void check_output_path(const std::string& path, const char* flag) {
  if (path.empty()) return;
  fs::path parent = fs::path(path).parent_path();
  CPDIT_CHECK(parent.empty() || fs::is_directory(parent), invalid_argument, flag, " ", path, ": folder ",
              parent.string(), " does not exist");
}

// Neither output may replace a file the run reads, nor the other output.
void refuse_overwriting_inputs(const GenerateArgs& args) {
  std::vector<NamedPath> inputs{{"--embeddings", args.embeddings}, {"--latents", args.latents},
                                {"--config", args.config}, {"--scheduler-config", args.scheduler_config}};
  if (!args.model.empty() && fs::exists(args.model))
    for (NamedPath& file : model_inputs("--model", args.model, "transformer",
                                        args.config.empty() ? std::nullopt : std::optional(args.config)))
      inputs.push_back(std::move(file));
  refuse_overwrite({{"--out", args.out}, {"--preview", args.preview}, {"--image", args.image}, {"--video", args.video}},
                   inputs);
}

nlohmann::json summary(const GenerateArgs& args, const RunInfo& run, const pipeline::StageLog& stages,
                       const LoopStats& result, const std::vector<int64_t>& peaks, double wall_seconds) {
  const RankLayout& layout = run.layout;
  // Each stage holds only its own weights: the process's most is the largest stage's.
  int64_t weight_bytes = 0;
  nlohmann::json stage_list = nlohmann::json::array();
  for (const pipeline::StageStats& st : stages.stages()) {
    weight_bytes = std::max(weight_bytes, st.weight_bytes);
    stage_list.push_back({{"name", st.name},
                          {"seconds", st.seconds},
                          {"weight_bytes", st.weight_bytes},
                          {"weight_bytes_after", st.weight_bytes_after},
                          {"activation_bytes", st.activation_bytes}});
  }
  double total = 0, fastest = result.step_seconds.empty() ? 0 : result.step_seconds[0];
  for (double s : result.step_seconds) {
    total += s;
    fastest = std::min(fastest, s);
  }
  const int steps = int(result.step_seconds.size());
  nlohmann::json j = {{"model", run.name},
                      {"height", args.height},
                      {"width", args.width},
                      {"steps", steps},
                      {"seed", args.seed},
                      {"dtype", args.dtype},
                      {"ranks", layout.ranks},
                      {"engine", layout.mpi ? "mpi" : "local"},
                      {"cfg", layout.config.cfg_degree},
                      {"ring", layout.config.ring_degree},
                      {"ulysses", layout.config.ulysses_degree},
                      {"rotate", parallel::rotate_method_name(layout.config.rotate_method)},
                      {"threads_per_rank", layout.threads_per_rank},
                      {"wall_seconds", wall_seconds},
                      {"loop_seconds", total},
                      {"seconds_per_step", steps ? total / steps : 0.0},
                      {"fastest_step_seconds", fastest},
                      {"weight_bytes_resident", weight_bytes},
                      {"stages", stage_list},
                      {"peak_stage_bytes", stages.peak_bytes()},
                      {"peak_activation_bytes_per_rank", peaks},
                      {"latents_sharded_between_steps", result.latents_sharded}};
  if (video_pipeline(run.pipeline)) j["frames"] = args.frames;
  if (result.latents_sharded) {
    // diffusers gathers the model output at every step; keeping the latents sharded leaves one
    // gather in all.
    j["latents_gather_seconds"] = result.gather_seconds;
    j["latents_gather_bytes"] = result.gather_bytes;
    j["gathers_avoided"] = std::max(steps - 1, 0);
    j["gather_bytes_avoided"] = int64_t(std::max(steps - 1, 0)) * result.gather_bytes;
  }
  if (!args.out.empty()) j["out"] = args.out;
  if (!args.preview.empty()) j["preview"] = args.preview;
  if (!args.image.empty()) j["image"] = args.image;
  if (!args.frames_dir.empty()) j["frames_dir"] = args.frames_dir;
  if (!args.video.empty()) j["video"] = args.video;
  return j;
}

void print_summary(const nlohmann::json& s) {
  auto mib = [](int64_t bytes) { return double(bytes) / (1 << 20); };
  std::string frames = s.contains("frames") ? " x " + std::to_string(int(s["frames"])) + " frames" : "";
  std::printf("model        %s, %lldx%lld%s, %d steps, seed %llu\n", s["model"].get<std::string>().c_str(),
              (long long)s["height"], (long long)s["width"], frames.c_str(), int(s["steps"]),
              (unsigned long long)s["seed"]);
  std::printf("parallelism  %d %s ranks, %sring %d x ulysses %d (%s), %d threads per rank\n", int(s["ranks"]),
              s["engine"].get<std::string>().c_str(),
              int(s["cfg"]) > 1 ? ("cfg " + std::to_string(int(s["cfg"])) + " x ").c_str() : "", int(s["ring"]),
              int(s["ulysses"]),
              s["rotate"].get<std::string>().c_str(), int(s["threads_per_rank"]));
  std::printf("time         %s wall, %.3f s per step (fastest %.3f s)\n",
              format_duration(s["wall_seconds"]).c_str(), double(s["seconds_per_step"]),
              double(s["fastest_step_seconds"]));
  for (const nlohmann::json& st : s["stages"])
    std::printf("stage        %-8s %s, weights %.2f MiB, activations %.2f MiB\n", st["name"].get<std::string>().c_str(),
                format_duration(st["seconds"]).c_str(), mib(st["weight_bytes"]), mib(st["activation_bytes"]));
  print_weights_line(s["weight_bytes_resident"], s["dtype"]);
  std::printf("memory       peak activations per rank:");
  for (int64_t peak : s["peak_activation_bytes_per_rank"]) std::printf(" %.1f MiB", mib(peak));
  std::printf("\n");
  if (s["latents_sharded_between_steps"])
    std::printf("latents      split between steps, gathered once at the end (%.2f MiB, %.4f s): %d per-step gathers avoided\n",
                mib(s["latents_gather_bytes"]), double(s["latents_gather_seconds"]), int(s["gathers_avoided"]));
  if (s.contains("out")) std::printf("wrote        %s\n", s["out"].get<std::string>().c_str());
  for (const char* file : {"preview", "image", "frames_dir", "video"})
    if (s.contains(file)) std::printf("wrote        %s\n", s[file].get<std::string>().c_str());
}

// This rank's (cfg, ring, Ulysses) mesh over `world`, and its replica of the model on the --backend asked
// for, its tokens split over its CFG group when that has more than one rank (by `plan`, else the model's own).
struct RankModel {
  comm::Mesh mesh;
  std::unique_ptr<nn::Model> model;
};

RankModel rank_model(comm::Communicator& world, const GenerateArgs& args, const Source& source, const RankLayout& layout,
                     std::optional<parallel::ContextParallelPlan> plan = std::nullopt) {
  const parallel::ContextParallelConfig& c = layout.config;
  RankModel m{comm::Mesh(world.split(0, world.rank()), c.ring_degree, c.ulysses_degree, c.cfg_degree),
              source.model.replica()};
  if (!args.parallel.backend.empty()) m.model->set_attention_backend(args.parallel.backend);
  if (m.mesh.flat().size() > 1) m.model->enable_parallelism(m.mesh.flat_group(), c, plan);
  return m;
}

// One rank's denoising loop; returns the full latents (every rank) and what it measured.
using RankLoop = std::function<std::pair<Tensor, LoopStats>(comm::Communicator& world, Progress& progress)>;

// Where the text embeddings came from, for errors.
std::string text_source(const GenerateArgs& args) {
  return !args.embedding_tensors.empty() ? "the given embeddings"
         : args.embeddings.empty()       ? "the encoded prompt"
                                         : args.embeddings;
}

// The options every loop takes alike from the flags (steps, size, seed, frames for video, the initial
// latents) and its step callback: the step ends for the finite watch, then on the progress lines.
template <class Options>
void set_loop_options(Options& options, const GenerateArgs& args, const Tensor& initial, FiniteWatch& finite,
                      Progress& progress) {
  options.steps = args.steps;
  if constexpr (requires { options.frames; }) options.frames = args.frames;
  options.height = args.height;
  options.width = args.width;
  options.seed = args.seed;
  options.initial_latents = initial;
  options.on_step = [&finite, &progress](int i, int n, double s) {
    finite.step_done();
    progress.step(i, n, s);
  };
}

// Why a --cfg 2 layout cannot split a loop's two guidance passes, when it cannot.
const char* no_guidance_reason(bool has_negative, const char* scale_flag_at_most_1) {
  return has_negative ? scale_flag_at_most_1 : "there are no negative prompt embeddings";
}

// `text`: the encode stage's output or the --embeddings file; empty: random embeddings.
RankLoop flux_loop(const GenerateArgs& args, const Source& source, const RankLayout& layout, const nn::TensorMap& text) {
  const models::flux::FluxConfig& config = pipeline::config_of<models::flux::FluxConfig>(source.model);
  auto conditioning = std::make_shared<pipeline::FluxConditioning>(
      text.empty() ? pipeline::random_flux_conditioning(config, 1, args.text_tokens, args.seed)
                   : pipeline::flux_conditioning(text, text_source(args), config));
  auto initial = std::make_shared<Tensor>(initial_latents(args));
  parallel::validate_cfg(layout.config, false, "FLUX.1's --guidance is an embedding the transformer reads");
  return [&args, &source, &layout, &config, conditioning, initial](comm::Communicator& world, Progress& progress) {
    RankModel ranked = rank_model(world, args, source, layout, pipeline::flux_sharded_latents_plan());
    const auto& model = ranked.model;
    comm::Communicator* group = &ranked.mesh.flat();
    FiniteWatch finite(*model, "denoise", args.check_finite);
    pipeline::FlowMatchEulerScheduler scheduler(source.flux_scheduler);
    pipeline::FluxGenerateOptions options;
    set_loop_options(options, args, *initial, finite, progress);
    options.guidance = std::isnan(args.guidance) ? 3.5f : args.guidance;  // FluxPipeline's default
    options.true_cfg_scale = std::isnan(args.true_cfg_scale) ? 1.0f : args.true_cfg_scale;  // FluxPipeline's default
    options.vae_scale_factor = source.vae_scale_factor;
    pipeline::FluxGenerateResult r = pipeline::generate_flux(*model, config, scheduler, *conditioning, options, group);
    return std::make_pair(r.latents, LoopStats{r.step_seconds, true, r.gather_seconds, r.gather_bytes});
  };
}

// A Wan-family loop on one rank's model replica with the options the flags give.
using VideoGenerate = std::function<pipeline::WanGenerateResult(const nn::Model&, const Tensor& prompt_embeds,
                                                                 const pipeline::WanGenerateOptions&)>;

// `text`: as flux_loop's.
RankLoop video_loop(const GenerateArgs& args, const Source& source, const RankLayout& layout, const nn::TensorMap& text,
                    float default_guidance, VideoGenerate generate) {
  const models::wan::WanConfig& config = video_config(source);
  auto embeds = std::make_shared<Tensor>(
      text.empty() ? pipeline::random_wan_prompt_embeds(config, 1, args.text_tokens, args.seed)
                   : pipeline::wan_prompt_embeds(text, text_source(args), config));
  // Guidance needs the negative prompt's embeddings; without them the loop runs unguided.
  auto negative = std::make_shared<Tensor>();
  if (text.count("negative_prompt_embeds"))
    *negative = pipeline::wan_prompt_embeds(text, text_source(args), config, "negative_prompt_embeds");
  auto initial = std::make_shared<Tensor>(initial_latents(args));
  const float guidance = std::isnan(args.guidance) ? default_guidance : args.guidance;
  parallel::validate_cfg(layout.config, pipeline::wan_runs_guidance(*negative, guidance),
                         no_guidance_reason(negative->defined(), "--guidance is at most 1"));
  return [&args, &source, &layout, guidance, generate, embeds, negative, initial](comm::Communicator& world,
                                                                                  Progress& progress) {
    RankModel ranked = rank_model(world, args, source, layout);
    const auto& model = ranked.model;
    FiniteWatch finite(*model, "denoise", args.check_finite);
    pipeline::WanGenerateOptions options;
    set_loop_options(options, args, *initial, finite, progress);
    options.cfg = &ranked.mesh.cfg();
    options.guidance_scale = guidance;
    options.negative_prompt_embeds = *negative;
    options.vae = source.wan_vae;
    pipeline::WanGenerateResult r = generate(*model, *embeds, options);
    return std::make_pair(r.latents, LoopStats{r.step_seconds, false, 0, 0});
  };
}

RankLoop qwenimage_loop(const GenerateArgs& args, const Source& source, const RankLayout& layout,
                        const nn::TensorMap& text) {
  const models::qwenimage::QwenImageConfig& config = pipeline::config_of<models::qwenimage::QwenImageConfig>(source.model);
  auto conditioning = std::make_shared<pipeline::QwenImageConditioning>(
      text.empty() ? pipeline::random_qwenimage_conditioning(config, 1, args.text_tokens, args.seed)
                   : pipeline::qwenimage_conditioning(text, text_source(args), config));
  auto initial = std::make_shared<Tensor>(initial_latents(args));
  const float true_cfg_scale = std::isnan(args.true_cfg_scale) ? 4.0f : args.true_cfg_scale;  // QwenImagePipeline's
  parallel::validate_cfg(layout.config, pipeline::qwenimage_runs_true_cfg(*conditioning, true_cfg_scale),
                         no_guidance_reason(conditioning->negative_prompt_embeds.defined(),
                                            "--true-cfg-scale is at most 1"));
  return [&args, &source, &layout, &config, conditioning, initial, true_cfg_scale](comm::Communicator& world,
                                                                                   Progress& progress) {
    RankModel ranked = rank_model(world, args, source, layout);
    const auto& model = ranked.model;
    FiniteWatch finite(*model, "denoise", args.check_finite);
    pipeline::FlowMatchEulerScheduler scheduler(source.flux_scheduler);
    pipeline::QwenImageGenerateOptions options;
    set_loop_options(options, args, *initial, finite, progress);
    options.true_cfg_scale = true_cfg_scale;
    options.cfg = &ranked.mesh.cfg();
    options.vae_scale_factor = source.vae_scale_factor;
    pipeline::QwenImageGenerateResult r = pipeline::generate_qwenimage(*model, config, scheduler, *conditioning, options);
    return std::make_pair(r.latents, LoopStats{r.step_seconds, false, 0, 0});
  };
}

RankLoop wan_loop(const GenerateArgs& args, const Source& source, const RankLayout& layout, const nn::TensorMap& text) {
  const auto& config = pipeline::config_of<models::wan::WanConfig>(source.model);
  return video_loop(args, source, layout, text, 5.0f,  // WanPipeline's default guidance
                    [&config, &source](const nn::Model& model, const Tensor& embeds, const pipeline::WanGenerateOptions& o) {
                      pipeline::UniPCMultistepScheduler scheduler(source.wan_scheduler);
                      return pipeline::generate_wan(model, config, scheduler, embeds, o);
                    });
}

RankLoop skyreels_loop(const GenerateArgs& args, const Source& source, const RankLayout& layout,
                       const nn::TensorMap& text) {
  const auto& config = pipeline::config_of<models::skyreels_v2::SkyReelsV2Config>(source.model);
  return video_loop(args, source, layout, text, 6.0f,  // SkyReelsV2DiffusionForcingPipeline's default guidance
                    [&config, &source, &args](const nn::Model& model, const Tensor& embeds,
                                              const pipeline::WanGenerateOptions& o) {
                      pipeline::SkyReelsGenerateOptions options;
                      options.video = o;
                      options.ar_step = args.ar_step;
                      options.fps = args.fps.value_or(24);
                      options.base_frames = args.base_num_frames;
                      options.overlap_history = args.overlap_history;
                      options.addnoise_condition = args.addnoise_condition;
                      return pipeline::generate_skyreels_v2(model, config, source.wan_scheduler, embeds, options);
                    });
}

// `text`: as flux_loop's.
RankLoop ltx_loop(const GenerateArgs& args, const Source& source, const RankLayout& layout, const nn::TensorMap& text) {
  const auto& config = pipeline::config_of<models::ltx_video::LtxVideoConfig>(source.model);
  auto conditioning = std::make_shared<pipeline::LtxConditioning>(
      text.empty() ? pipeline::random_ltx_conditioning(config, 1, args.text_tokens, args.seed)
                   : pipeline::ltx_conditioning(text, text_source(args), config));
  auto initial = std::make_shared<Tensor>(initial_latents(args));
  const float guidance = std::isnan(args.guidance) ? 3.0f : args.guidance;  // LTXPipeline's default
  parallel::validate_cfg(layout.config, pipeline::ltx_runs_guidance(*conditioning, guidance),
                         no_guidance_reason(conditioning->negative_prompt_embeds.defined(), "--guidance is at most 1"));
  return [&args, &source, &layout, &config, conditioning, initial, guidance](comm::Communicator& world,
                                                                             Progress& progress) {
    RankModel ranked = rank_model(world, args, source, layout);
    FiniteWatch finite(*ranked.model, "denoise", args.check_finite);
    pipeline::FlowMatchEulerScheduler scheduler(source.flux_scheduler);
    pipeline::LtxGenerateOptions options;
    set_loop_options(options, args, *initial, finite, progress);
    options.frame_rate = double(ltx_frame_rate(args));
    options.guidance_scale = guidance;
    options.vae = source.ltx_vae;
    options.cfg = &ranked.mesh.cfg();
    pipeline::LtxGenerateResult r = pipeline::generate_ltx(*ranked.model, config, scheduler, *conditioning, options);
    return std::make_pair(r.latents, LoopStats{r.step_seconds, false, 0, 0});
  };
}

// Names each stage on stderr as it ends (the denoise loop adds its own step lines); a failure is then
// the only line of a stage that has not ended.
void report_stages(pipeline::StageLog& stages, bool silent) {
  if (silent) return;
  stages.on_end = [](const pipeline::StageStats& s) {
    std::fprintf(stderr, "%s done in %s\n", s.name.c_str(), format_duration(s.seconds).c_str());
  };
}

// The text embeddings: the --embeddings file, the prompt through the pipeline's text encoders (the
// encode stage: under mpirun on rank 0 alone, which may use this machine's cores while the other
// processes wait for its tensors), or none (the loops then use random embeddings).
nn::TensorMap text_embeddings(const GenerateArgs& args, const pipeline::PipelineParts& parts,
                              const nn::LoadOptions& load, pipeline::StageLog& stages) {
  if (!args.embedding_tensors.empty()) return args.embedding_tensors;
  if (!args.embeddings.empty()) return io::load_safetensors(args.embeddings);
  if (!args.prompt) return {};
  const pipeline::PromptEncoding request{*args.prompt, args.negative_prompt, args.text_tokens, load};
  auto encode = [&] {
    CPDIT_CHECK(parts.text, invalid_argument, "--prompt needs the pipeline's text encoders: ",
                args.preset.empty() ? args.model : "preset " + args.preset,
                " has no tokenizer/ and text_encoder/ (give --embeddings instead)");
    return pipeline::encode_prompt(*parts.text, request);
  };
  const int threads = args.parallel.threads > 0 ? args.parallel.threads : hardware_threads();
  const std::shared_ptr<comm::Communicator> processes = comm::launched_by_mpi() ? comm::mpi_world() : nullptr;
  return pipeline::encode_stage(stages, encode, threads, processes.get());
}

}  // namespace

bool lead_process() {
  if (!comm::launched_by_mpi()) return true;
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* rank = std::getenv(name)) return std::string(rank) == "0";
  return true;
}

Generation generate(GenerateArgs& args, pipeline::StageLog& stages) {
  check_same_model_across_ranks({args.model, args.config, args.scheduler_config});
  const bool lead = lead_process();
  const nn::LoadOptions load = nn::load_options(args.dtype);
  const ScopedMatmulPrecision precision(matmul_precision_for(args.dtype));
  const pipeline::PipelineParts parts = args.preset.empty()
                                            ? pipeline::PipelineParts::of_folder(args.model)
                                            : pipeline::PipelineParts::of_preset(args.preset, args.seed);
  // The pipelines' max_sequence_length: LTXPipeline's 128, FLUX.1-dev's and Wan's 512.
  const bool ltx_text = args.preset.rfind("ltx-", 0) == 0 || (parts.text && parts.text->pipeline_class.rfind("LTX", 0) == 0);
  if (args.text_tokens == 0) args.text_tokens = ltx_text ? 128 : 512;
  CPDIT_CHECK((args.image.empty() && args.frames_dir.empty() && args.video.empty()) || parts.vae, invalid_argument,
              "--image, --frames-dir and --video need the pipeline's VAE: ", args.model,
              " has no vae/ (give a diffusers pipeline folder or a preset)");
  CPDIT_CHECK(!args.decode || parts.vae, invalid_argument, "decoding needs the pipeline's VAE: ", args.model,
              " has no vae/ (give a diffusers pipeline folder or a preset, or ask for the latents)");
  const nn::TensorMap text = text_embeddings(args, parts, load, stages);

  Generation generation;
  RunInfo& info = generation.info;
  if (args.steps == 0 && !args.preset.empty()) args.steps = 4;
  stages.run("denoise", [&] {
    const Source source = open_source(args, load);
    refuse_overwriting_inputs(args);  // after the model's class and files are named, before anything is written
    info.name = source.name;
    info.pipeline = source.pipeline;
    const bool wan = wan_family(source.pipeline);  // Wan 2.1 or SkyReels-V2 video
    const bool ltx = source.pipeline == pipeline::PipelineKind::ltx_video;
    const bool video = wan || ltx;
    const bool qwen = source.pipeline == pipeline::PipelineKind::qwenimage;
    const bool preset = !args.preset.empty();
    // LTXPipeline's defaults: 161 frames of 512x704, 50 steps.
    if (args.steps == 0) args.steps = video || qwen ? 50 : 28;
    if (args.height == 0) args.height = preset ? 256 : ltx ? 512 : wan ? 480 : 1024;
    if (args.width == 0) args.width = preset ? 256 : ltx ? 704 : wan ? 832 : 1024;
    CPDIT_CHECK(video || args.frames == 0, invalid_argument, "--frames is for video models; ", source.name, " is an image model");
    CPDIT_CHECK(!video || args.preview.empty(), invalid_argument, "--preview is for FLUX.1 images, not video latents");
    CPDIT_CHECK(!qwen || args.preview.empty(), invalid_argument, "--preview is for FLUX.1 latents, not Qwen-Image's");
    CPDIT_CHECK(!video || args.image.empty(), invalid_argument, "--image is for images; write video with --frames-dir or --video");
    CPDIT_CHECK(video || args.frames_dir.empty(), invalid_argument, "--frames-dir is for video; write an image with --image");
    CPDIT_CHECK(!qwen || std::isnan(args.guidance), invalid_argument,
                "--guidance is for guidance-distilled models; Qwen-Image's classifier-free guidance is --true-cfg-scale");
    CPDIT_CHECK(!video || std::isnan(args.true_cfg_scale), invalid_argument,
                "--true-cfg-scale is for FLUX.1 and Qwen-Image; Wan's classifier-free guidance is --guidance, as LTX-Video's");
    CPDIT_CHECK(video || args.video.empty(), invalid_argument, "--video is for video; write an image with --image");
    CPDIT_CHECK(ltx || (args.decode_timestep == 0.0f && !args.decode_noise_scale), invalid_argument,
                "--decode-timestep and --decode-noise-scale are for LTX-Video's timestep-conditioned VAE");
    if (args.frames == 0) args.frames = preset ? (ltx ? 9 : 5) : ltx ? 161 : 81;
    // Sizes are refused here, before any rank starts, and so is a run that cannot fit in memory.
    if (ltx) {
      const auto& config = pipeline::config_of<models::ltx_video::LtxVideoConfig>(source.model);
      const Shape latent = pipeline::ltx_latent_shape(config, 1, args.frames, args.height, args.width, source.ltx_vae);
      const double elements = double(shape_numel(latent));
      check_generate_fits(elements, elements / double(latent[1]) + double(args.text_tokens), double(config.inner_dim()));
    } else if (wan) {
      const models::wan::WanConfig& config = video_config(source);
      const Shape latent = pipeline::wan_latent_shape(config, 1, args.frames, args.height, args.width, source.wan_vae);
      const double elements = double(shape_numel(latent));
      // A SkyReels-V2 long video shows the model at most base_num_frames at a time.
      const int64_t model_frames = args.overlap_history && source.pipeline == pipeline::PipelineKind::skyreels_v2
                                       ? std::min(latent[2], (args.base_num_frames - 1) / source.wan_vae.temporal + 1)
                                       : latent[2];
      check_generate_fits(elements, elements / double(latent[1] * config.patch_volume()) * double(model_frames) / double(latent[2]),
                          double(config.inner_dim()));
    } else {
      const pipeline::FluxLatentShape latent = pipeline::flux_latent_shape(args.height, args.width, 16, 1, source.vae_scale_factor);
      const int64_t hidden = qwen ? pipeline::config_of<models::qwenimage::QwenImageConfig>(source.model).inner_dim()
                                  : pipeline::config_of<models::flux::FluxConfig>(source.model).inner_dim();
      check_generate_fits(double(shape_numel(latent.unpacked())), double(latent.tokens() + args.text_tokens),
                          double(hidden));
    }

    info.layout = resolve_layout(args.parallel, source.model.heads, hardware_threads());
    const RankLoop loop = source.pipeline == pipeline::PipelineKind::skyreels_v2 ? skyreels_loop(args, source, info.layout, text)
                          : wan  ? wan_loop(args, source, info.layout, text)
                          : ltx  ? ltx_loop(args, source, info.layout, text)
                          : qwen ? qwenimage_loop(args, source, info.layout, text)
                                 : flux_loop(args, source, info.layout, text);

    comm::LocalOptions local;
    local.threads_per_rank = info.layout.threads_per_rank;
    std::mutex kept;
    comm::run_ranks(
        info.layout.ranks,
        [&](comm::Communicator& world) {
          CPDIT_CHECK(world.size() == info.layout.ranks, internal, "expected ", info.layout.ranks, " ranks, got ",
                      world.size());
          Progress progress("denoise", args.json || !lead || world.rank() != 0);
          memory::reset_peak();
          auto [mine, stats] = loop(world, progress);
          std::vector<int64_t> rank_peaks(size_t(world.size()));
          int64_t peak = memory::peak_bytes();
          world.all_gather(&peak, sizeof peak, rank_peaks.data());
          stages.add_rank_peak(peak);
          // Every rank ends with the whole latents: rank 0's are kept (under mpirun, each process's own).
          if (world.rank() != 0 && !comm::launched_by_mpi()) return;
          std::lock_guard<std::mutex> lock(kept);
          generation.latents = mine;
          generation.loop = stats;
          generation.peaks = rank_peaks;
        },
        local);
  });

  // The decoded pixels, when there is a VAE and an output wants them.
  const bool decode = parts.vae && (args.decode || !args.out.empty() || !args.image.empty() ||
                                    !args.frames_dir.empty() || !args.video.empty());
  comm::LocalOptions local;
  local.threads_per_rank = info.layout.threads_per_rank;
  const pipeline::DecodeTimestep decode_timestep{args.decode_timestep, args.decode_noise_scale, args.seed, {}};
  if (decode)
    generation.pixels =
        pipeline::decode_stage(stages, parts.vae, generation.latents, info.layout.ranks, local, decode_timestep,
                               args.vae_split);
  if (info.pipeline == pipeline::PipelineKind::qwenimage && generation.pixels.defined() && lead)
    generation.pixels = pipeline::qwenimage_image_pixels(generation.pixels);
  return generation;
}

namespace {

void run(GenerateArgs args) {
  auto start = std::chrono::steady_clock::now();
  check_output_path(args.out, "--out");
  check_output_path(args.preview, "--preview");
  check_output_path(args.image, "--image");
  // A folder may be named with a trailing slash ("frames/"): its parent must exist.
  const fs::path frames_dir(args.frames_dir);
  check_output_path((frames_dir.has_filename() ? frames_dir : frames_dir.parent_path()).string(), "--frames-dir");
  check_output_path(args.video, "--video");
  CPDIT_CHECK(args.video.empty() || args.video.ends_with(".mp4"), invalid_argument, "--video must end in .mp4, got '",
              args.video, "'");
  CPDIT_CHECK(!args.fps || *args.fps <= 1000, invalid_argument, "--fps must be at most 1000, got ", *args.fps);
  CPDIT_CHECK(!(args.prompt && !args.embeddings.empty()), invalid_argument, "give --prompt or --embeddings, not both");
  CPDIT_CHECK(args.prompt || !args.negative_prompt, invalid_argument, "--negative-prompt goes with --prompt");
  const bool lead = lead_process();
  pipeline::StageLog stages;
  report_stages(stages, args.json || !lead);
  const Generation generation = generate(args, stages);
  if (!lead) return;

  const RunInfo& info = generation.info;
  const Tensor& latents = generation.latents;
  const Tensor& pixels = generation.pixels;
  const bool video = video_pipeline(info.pipeline);
  const bool ltx = info.pipeline == pipeline::PipelineKind::ltx_video;
  const bool qwen = info.pipeline == pipeline::PipelineKind::qwenimage;
  const std::string layout_note =
      ltx     ? "ltx latents (B, C, F, H/32, W/32), before the VAE's latents_mean/std"
      : video ? "wan latents (B, 16, F, H/8, W/8)"
      : qwen  ? "qwenimage latents (B, 16, 1, H/8, W/8), before the VAE's latents_mean/std"
              : "flux latents (B, 16, H/8, W/8), before the VAE's scaling/shift";
  io::OutputBatch outputs;  // every output appears at the end, together, or none does
  if (!args.out.empty()) {
    nn::TensorMap tensors{{"latents", latents}};
    if (pixels.defined()) tensors[video ? "video" : "image"] = pixels;
    io::save_safetensors(args.out, tensors,
                         {{"format", layout_note}, {"seed", std::to_string(args.seed)}, {"steps", std::to_string(args.steps)}});
  }
  if (!args.preview.empty())
    io::write_png(args.preview, pipeline::flux_latent_preview(latents), args.width, args.height);
  if (!args.image.empty()) pipeline::write_image_pngs(args.image, pixels);
  if (!args.frames_dir.empty()) pipeline::write_frame_pngs(args.frames_dir, pixels);
  // generate's video loops make one clip: item 0 of the (1, F, H, W, 3) video, at --fps when given, else
  // at the rate the pipeline makes (SkyReels-V2's default fps input 24, LTX-Video's 25, Wan 16).
  const bool skyreels = info.pipeline == pipeline::PipelineKind::skyreels_v2;
  if (!args.video.empty())
    io::write_mp4(args.video, pixels.select(0, 0),
                  ltx ? int(ltx_frame_rate(args)) : int(args.fps.value_or(skyreels ? 24 : pipeline::kWanFramesPerSecond)));
  outputs.commit();
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  nlohmann::json s = summary(args, info, stages, generation.loop, generation.peaks, wall);
  if (args.json) {
    std::printf("%s\n", s.dump().c_str());
  } else {
    print_summary(s);
  }
  std::fflush(stdout);
}

void add_generate(CLI::App& parent) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "generate", "A prompt to a FLUX.1 or Qwen-Image image or a Wan or LTX-Video video across ranks (the main job)");
  cmd->footer("A prompt to an image (FLUX.1, Qwen-Image) or a video (Wan, SkyReels-V2, LTX-Video), in stages that "
      "each load their model when they start and "
      "free it when they end: encode (the pipeline's tokenizers and text encoders, once: on rank 0 under mpirun), denoise "
      "(seeded noise, the model's scheduler — flow-match Euler for FLUX.1, Qwen-Image and LTX-Video, UniPC for Wan "
      "and SkyReels-V2 — and the transformer, "
      "with the tokens split across ranks: ring, Ulysses or both; FLUX.1 keeps its image tokens split for the "
      "whole loop and gathers them once at the end), decode (the VAE, its rows split over the same ranks). "
      "The summary prints each stage's time and memory.\n"
      "Runs on local ranks (threads of this process) or, when launched by mpirun, on the MPI processes. "
      "Text comes from --prompt, from --embeddings (the tensors encode-prompt writes, see --embeddings) or, with "
      "neither, deterministic random embeddings.\n"
      "Examples:\n"
      "  cpdit generate --preset flux-mini --prompt \"a red fox in the snow\" --image fox.png\n"
      "  cpdit generate --preset flux-mini --steps 4 --out latents.safetensors --preview preview.png\n"
      "  cpdit generate --model FLUX.1-dev/ --embeddings prompt.safetensors --ring 2 --ulysses 2 --out a.safetensors\n"
      "  cpdit generate --preset wan-mini --frames 17 --height 256 --width 256 --ranks 2 --out clip.safetensors\n"
      "  mpirun -np 4 cpdit generate --preset flux-tiny --ring 2 --ulysses 2 --out a.safetensors");
  CLI::Option_group* source = cmd->add_option_group("Model");
  source->add_option("--model", args->model,
                     "a diffusers FLUX.1, Qwen-Image, Wan, SkyReels-V2 (diffusion forcing) or LTX-Video pipeline folder (model_index.json, transformer/, scheduler/), a "
                     "transformer folder, an index json, or one .safetensors file (e.g. the original FLUX.1 release)");
  source->add_option("--preset", args->preset,
                     "a built-in model with seeded random weights: flux-tiny, flux-mini, wan-tiny, wan-mini, qwen-mini, "
                     "skyreels-tiny, skyreels-mini, ltx-tiny or ltx-mini");
  source->require_option(1);
  cmd->add_option("--config", args->config, "transformer config.json overriding the checkpoint's or the inferred one");
  cmd->add_option("--scheduler-config", args->scheduler_config,
                  "scheduler_config.json (default: DIR/scheduler/, else FLUX.1-dev's)");
  add_dtype_flag(*cmd, args->dtype);
  cmd->add_option("--steps", args->steps, "denoising steps (default: 4 for presets, 28 for FLUX.1, 50 for the others)")->check(whole_number<int>());
  cmd->add_option("--height", args->height, "height in pixels, a multiple of 16 (LTX-Video: 32) (default: 256 for presets, 1024 for FLUX.1 and Qwen-Image, 480 for Wan, 512 for LTX-Video)")->check(whole_number<int64_t>());
  cmd->add_option("--width", args->width, "width in pixels, a multiple of 16 (LTX-Video: 32) (default: 256 for presets, 1024 for FLUX.1 and Qwen-Image, 832 for Wan, 704 for LTX-Video)")->check(whole_number<int64_t>());
  cmd->add_option("--frames,--num-frames", args->frames, "video: frames of the clip, 4k + 1 for Wan (default: 5 for presets, 81 "
                  "otherwise), 8k + 1 for LTX-Video (default: 9 for presets, 161 otherwise)")->check(whole_number<int64_t>());
  cmd->add_option("--seed", args->seed, "seed of the initial noise (and of the random embeddings)")
      ->check(whole_number<uint64_t>(0));
  cmd->add_option("--guidance", args->guidance,
                  "the pipeline's guidance_scale: FLUX.1-dev's guidance embedding (default 3.5), Wan's classifier-free "
                  "guidance (default 5.0; SkyReels-V2 6.0; LTX-Video 3.0; runs when there are negative_prompt_embeds)")
      ->check(finite_number());
  cmd->add_option("--prompt", args->prompt,
                  "the prompt, through the pipeline folder's (or preset's) tokenizers and text encoders");
  cmd->add_option("--negative-prompt", args->negative_prompt,
                  "the negative prompt of classifier-free guidance: Wan and LTX-Video (default \"\", as their pipelines); FLUX.1 "
                  "(none by default; used with --true-cfg-scale > 1)");
  cmd->add_option("--true-cfg-scale", args->true_cfg_scale,
                  "true classifier-free guidance on the negative prompt (runs when there are negative embeddings "
                  "and the scale is > 1): Qwen-Image (default 4.0, rescaled to the conditional norm), FLUX.1 "
                  "(default 1.0: off)");
  cmd->add_option("--embeddings", args->embeddings,
                  "safetensors with prompt_embeds (B, L, D) [FLUX.1: and pooled_prompt_embeds (B, P), negative_prompt_embeds "
                  "and negative_pooled_prompt_embeds for true CFG; Wan: and negative_prompt_embeds for guidance; "
                  "Qwen-Image: and prompt_embeds_mask (B, L), negative_prompt_embeds [and its _mask] for true CFG; LTX-Video: and "
                  "prompt_attention_mask (B, L), negative_prompt_embeds [and negative_prompt_attention_mask] for guidance]");
  cmd->add_option("--latents", args->latents,
                  "safetensors whose `latents` is the initial noise in the pipeline's layout (FLUX.1 and LTX-Video: packed "
                  "(B, tokens, in_channels); Wan: (B, C, F', h, w)), as diffusers' latents= argument; may be the --embeddings file");
  cmd->add_option("--ar-step", args->ar_step,
                  "SkyReels-V2: each block of latent frames starts this many steps after the one before (default 0: "
                  "all frames in step)")
      ->check(whole_number<int64_t>(0));
  cmd->add_option("--fps", args->fps,
                  "the clip's frame rate: --video plays at it (default: SkyReels-V2 24, LTX-Video 25, Wan 16), SkyReels-V2 "
                  "models with an fps embedding are told it (16 or other), LTX-Video scales its RoPE time by it")
      ->check(whole_number<int64_t>());
  cmd->add_option("--base-num-frames", args->base_num_frames,
                  "SkyReels-V2: the most frames denoised together (default 97); a longer clip is made in chunks that "
                  "overlap by --overlap-history frames")
      ->check(whole_number<int64_t>(1));
  cmd->add_option("--overlap-history", args->overlap_history,
                  "SkyReels-V2 long video: frames each chunk takes from the end of the one before (e.g. 17 or 37)")
      ->check(whole_number<int64_t>(1));
  cmd->add_option("--addnoise-condition", args->addnoise_condition,
                  "SkyReels-V2 long video: noise added to the frames a chunk takes over, as a timestep (0 to 999; "
                  "default 0: none; 20 recommended)")
      ->check(finite_number());
  cmd->add_option("--text-tokens", args->text_tokens,
                  "text length: the T5/UMT5 max_sequence_length of --prompt (FLUX.1-dev and Wan: 512, schnell: 256, "
                  "LTX-Video: 128), "
                  "or of the random embeddings without --prompt and --embeddings")
      ->check(whole_number<int64_t>());
  cmd->add_option("--decode-timestep", args->decode_timestep,
                  "LTX-Video's timestep-conditioned VAE: the decode timestep (default 0, as LTXPipeline; 0.05 for "
                  "LTX-Video 0.9.1+)")
      ->check(finite_number());
  cmd->add_option("--decode-noise-scale", args->decode_noise_scale,
                  "LTX-Video's timestep-conditioned VAE: the weight of the noise mixed into the latents before decoding "
                  "(default: the decode timestep; 0.025 for LTX-Video 0.9.1+)")
      ->check(finite_number());
  add_vae_split_option(cmd, args->vae_split);
  cmd->add_option("--out", args->out,
                  "write the final latents here (safetensors, atomically) and, with a VAE, the decoded `image` (B, H, W, 3) "
                  "or `video` (B, F, H, W, 3), f32 in [0, 1]");
  cmd->add_option("--image", args->image, "FLUX.1, Qwen-Image: write the decoded image here as PNG (several: FILE_0.png, FILE_1.png, ...)");
  cmd->add_option("--frames-dir", args->frames_dir, "video: write the decoded frames into this folder as frame_00000.png, ...");
  cmd->add_option("--video", args->video, "video: write the decoded clip here as H.264 MP4 at --fps frames per second");
  cmd->add_option("--preview", args->preview, "FLUX.1: write a PNG preview of the latents here (linear latent-to-RGB projection)");
  cmd->add_flag("--json", args->json, "print the closing summary as one JSON object and no progress");
  cmd->add_flag("--check-finite", args->check_finite,
                "check every module's outputs for NaN/Inf and name the first module that made them (slower; "
                "the transformer's output is always checked once per step)");
  add_parallel_flags(*cmd, args->parallel);
  add_cfg_flag(*cmd, args->parallel);
  cmd->callback([args] { run(*args); });
}

const bool registered = register_command("generate", add_generate);

}  // namespace
}  // namespace cpdit::app
