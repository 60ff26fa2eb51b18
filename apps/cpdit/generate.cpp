// The generate job (generate.hpp): the model, its scheduler and the VAE's factors opened from a
// pipeline folder, a transformer checkpoint or a preset; the defaults the flags left open filled in
// and every size refused before a rank starts; then the stages (pipeline/stages.hpp): encode, the
// denoising loop on local ranks or the MPI processes, decode. It writes nothing: `cpdit generate`
// (cmd_generate.cpp) writes what it returns, the Python package hands it back as arrays.
#include "finite_watch.hpp"
#include "generate.hpp"
#include "generate_images.hpp"
#include "memory_check.hpp"
#include "same_across_ranks.hpp"
#include "output_paths.hpp"
#include "parallel_flags.hpp"
#include "progress.hpp"
#include "weight_flags.hpp"

#include <cpdit/comm/launch.hpp>
#include <cpdit/comm/mesh.hpp>
#include <cpdit/comm/mpi.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/core/memory.hpp>
#include <cpdit/core/threads.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/io/model_files.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/models/registry.hpp>
#include <cpdit/io/png.hpp>
#include <cpdit/pipeline/flux_pipeline.hpp>
#include <cpdit/pipeline/latents.hpp>
#include <cpdit/pipeline/ltx_pipeline.hpp>
#include <cpdit/pipeline/pipeline_table.hpp>
#include <cpdit/pipeline/presets.hpp>
#include <cpdit/pipeline/qwenimage_pipeline.hpp>
#include <cpdit/pipeline/skyreels_pipeline.hpp>
#include <cpdit/pipeline/stages.hpp>
#include <cpdit/pipeline/wan_image.hpp>
#include <cpdit/pipeline/wan_pipeline.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>

namespace cpdit::app {
namespace {

namespace fs = std::filesystem;

// Wan 2.1 and SkyReels-V2 (a Wan 2.1 network): frames, the Wan VAE, UniPC.
bool wan_family(pipeline::PipelineKind kind) {
  return kind == pipeline::PipelineKind::wan || kind == pipeline::PipelineKind::skyreels_v2;
}

// The transformer, the pipeline that runs its class, its scheduler, and where they came from.
struct Source {
  models::LoadedModel model;
  // Wan 2.2 A14B: transformer_2/, which takes the timesteps below boundary_ratio x num_train_timesteps.
  std::optional<models::LoadedModel> low_noise;
  double boundary_timestep = 0;
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

// SkyReels-V2 by diffusion forcing, which takes images as latent frames: its transformer's input is the
// latents alone (the non-DF image-to-video models take the image as 20 more input channels).
bool diffusion_forcing(const Source& source) {
  if (source.pipeline != pipeline::PipelineKind::skyreels_v2) return false;
  const models::wan::WanConfig& config = video_config(source);
  return config.out_channels == 0 || config.in_channels == config.out_channels;
}

// Wan 2.1 and SkyReels-V2 image-to-video (WanImageToVideoPipeline, SkyReelsV2ImageToVideoPipeline: I2V,
// FLF2V), which take the image as more input channels (and, with image_dim, CLIP's tokens of it); one loop,
// generate_wan's, runs both.
bool conditions_on_image(const Source& source) {
  return wan_family(source.pipeline) && pipeline::wan_takes_image(video_config(source));
}

// Wan 2.2 A14B's folders hand the timesteps below model_index.json's boundary_ratio x the scheduler's
// num_train_timesteps to transformer_2/: opened into `s` when the folder has one, so that no step runs on
// the wrong expert.
void open_low_noise_expert(Source& s, const GenerateArgs& args, const nn::LoadOptions& load) {
  const std::optional<std::string> folder = io::pipeline_component(args.model, "transformer_2");
  if (!folder) return;
  const std::string index = (fs::path(args.model) / "model_index.json").string();
  const nlohmann::json j = io::read_json(index);
  CPDIT_CHECK(s.pipeline == pipeline::PipelineKind::wan && j.contains("boundary_ratio") &&
                  j["boundary_ratio"].is_number() && j["boundary_ratio"].get<double>() > 0 &&
                  j["boundary_ratio"].get<double>() <= 1,
              invalid_argument, args.model, " has a transformer_2/: generate runs it as Wan 2.2's low-noise expert, "
              "which needs a WanTransformer3DModel and a boundary_ratio in (0, 1] in ", index);
  s.low_noise = models::open_model(*folder, std::nullopt, load);
  const auto& high = pipeline::config_of<models::wan::WanConfig>(s.model);
  const auto* low = std::any_cast<models::wan::WanConfig>(&s.low_noise->config);
  CPDIT_CHECK(low && low->in_channels == high.in_channels && low->out_channels == high.out_channels &&
                  low->patch_size == high.patch_size && low->text_dim == high.text_dim &&
                  low->image_dim == high.image_dim,
              invalid_argument, *folder, " is not a WanTransformer3DModel that takes what transformer/ takes");
  s.boundary_timestep = j["boundary_ratio"].get<double>() * double(s.wan_scheduler.num_train_timesteps);
}

// The image-to-image start of a FLUX.1 or Qwen-Image run (image_start), or none without --init-image.
pipeline::ImageStart start_image(const GenerateArgs& args, const pipeline::PipelineParts& parts, const Source& source) {
  if (args.init_image.empty()) return {};
  const int64_t channels = source.pipeline == pipeline::PipelineKind::qwenimage
                               ? pipeline::config_of<models::qwenimage::QwenImageConfig>(source.model).in_channels / 4
                               : pipeline::config_of<models::flux::FluxConfig>(source.model).in_channels / 4;
  return image_start(args, parts, channels, source.vae_scale_factor);
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
                          ? pipeline::UniPCConfig::wan21(
                                pipeline::skyreels_flow_shift(video_config(s), !args.first_image.empty()))
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
  open_low_noise_expert(s, args, load);
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

// Neither output may replace a file the run reads, nor the other output.
void refuse_overwriting_inputs(const GenerateArgs& args) {
  std::vector<NamedPath> inputs{{"--embeddings", args.embeddings}, {"--latents", args.latents},
                                {"--config", args.config}, {"--scheduler-config", args.scheduler_config},
                                {"--first-image", args.first_image}, {"--last-image", args.last_image},
                                {"--init-image", args.init_image}};
  if (!args.model.empty() && fs::exists(args.model))
    for (NamedPath& file : model_inputs("--model", args.model, "transformer",
                                        args.config.empty() ? std::nullopt : std::optional(args.config)))
      inputs.push_back(std::move(file));
  refuse_overwrite({{"--out", args.out}, {"--preview", args.preview}, {"--image", args.image}, {"--video", args.video}},
                   inputs);
}

// This rank's (cfg, ring, Ulysses) mesh over `world`, and its replica of the model (and of a low-noise
// expert) on the --backend asked for, its tokens split over its CFG group when that has more than one rank
// (by `plan`, else the model's own).
struct RankModel {
  comm::Mesh mesh;
  std::unique_ptr<nn::Model> model;
  std::unique_ptr<nn::Model> low_noise;  // Source::low_noise's, or null
};

RankModel rank_model(comm::Communicator& world, const GenerateArgs& args, const Source& source, const RankLayout& layout,
                     std::optional<parallel::ContextParallelPlan> plan = std::nullopt) {
  const parallel::ContextParallelConfig& c = layout.config;
  RankModel m{comm::Mesh(world.split(0, world.rank()), c.ring_degree, c.ulysses_degree, c.cfg_degree),
              source.model.replica(), source.low_noise ? source.low_noise->replica() : nullptr};
  for (nn::Model* model : {m.model.get(), m.low_noise.get()}) {
    if (model == nullptr) continue;
    if (!args.parallel.backend.empty()) model->set_attention_backend(args.parallel.backend);
    if (m.mesh.flat().size() > 1) model->enable_parallelism(m.mesh.flat_group(), c, plan);
  }
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

// `text`: the encode stage's output or the --embeddings file; empty: random embeddings. `image`:
// image_start's for image-to-image, else none.
RankLoop flux_loop(const GenerateArgs& args, const Source& source, const RankLayout& layout, const nn::TensorMap& text,
                   const pipeline::ImageStart& image) {
  const models::flux::FluxConfig& config = pipeline::config_of<models::flux::FluxConfig>(source.model);
  auto conditioning = std::make_shared<pipeline::FluxConditioning>(
      text.empty() ? pipeline::random_flux_conditioning(config, 1, args.text_tokens, args.seed)
                   : pipeline::flux_conditioning(text, text_source(args), config));
  auto initial = std::make_shared<Tensor>(initial_latents(args));
  auto start = std::make_shared<pipeline::ImageStart>(image);
  parallel::validate_cfg(layout.config, false, "FLUX.1's --guidance is an embedding the transformer reads");
  return [&args, &source, &layout, &config, conditioning, initial, start](comm::Communicator& world,
                                                                          Progress& progress) {
    RankModel ranked = rank_model(world, args, source, layout, pipeline::flux_sharded_latents_plan());
    const auto& model = ranked.model;
    comm::Communicator* group = &ranked.mesh.flat();
    FiniteWatch finite(*model, "denoise", args.check_finite);
    pipeline::FlowMatchEulerScheduler scheduler(source.flux_scheduler);
    pipeline::FluxGenerateOptions options;
    set_loop_options(options, args, *initial, finite, progress);
    // FluxPipeline's default, FluxImg2ImgPipeline's from an image.
    options.guidance = !std::isnan(args.guidance) ? args.guidance : args.init_image.empty() ? 3.5f : 7.0f;
    options.true_cfg_scale = std::isnan(args.true_cfg_scale) ? 1.0f : args.true_cfg_scale;  // FluxPipeline's default
    options.vae_scale_factor = source.vae_scale_factor;
    options.image = *start;
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
    FiniteWatch finite({model.get(), ranked.low_noise.get()}, "denoise", args.check_finite);
    pipeline::WanGenerateOptions options;
    set_loop_options(options, args, *initial, finite, progress);
    options.cfg = &ranked.mesh.cfg();
    options.guidance_scale = guidance;
    options.negative_prompt_embeds = *negative;
    options.vae = source.wan_vae;
    if (ranked.low_noise)
      options.low_noise = {ranked.low_noise.get(), source.boundary_timestep,
                           std::isnan(args.guidance_2) ? guidance : args.guidance_2};
    pipeline::WanGenerateResult r = generate(*model, *embeds, options);
    return std::make_pair(r.latents, LoopStats{r.step_seconds, false, 0, 0});
  };
}

// `image`: as flux_loop's.
RankLoop qwenimage_loop(const GenerateArgs& args, const Source& source, const RankLayout& layout,
                        const nn::TensorMap& text, const pipeline::ImageStart& image) {
  const models::qwenimage::QwenImageConfig& config = pipeline::config_of<models::qwenimage::QwenImageConfig>(source.model);
  auto conditioning = std::make_shared<pipeline::QwenImageConditioning>(
      text.empty() ? pipeline::random_qwenimage_conditioning(config, 1, args.text_tokens, args.seed)
                   : pipeline::qwenimage_conditioning(text, text_source(args), config));
  auto initial = std::make_shared<Tensor>(initial_latents(args));
  const float true_cfg_scale = std::isnan(args.true_cfg_scale) ? 4.0f : args.true_cfg_scale;  // QwenImagePipeline's
  parallel::validate_cfg(layout.config, pipeline::qwenimage_runs_true_cfg(*conditioning, true_cfg_scale),
                         no_guidance_reason(conditioning->negative_prompt_embeds.defined(),
                                            "--true-cfg-scale is at most 1"));
  auto start = std::make_shared<pipeline::ImageStart>(image);
  return [&args, &source, &layout, &config, conditioning, initial, true_cfg_scale, start](comm::Communicator& world,
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
    options.image = *start;
    pipeline::QwenImageGenerateResult r = pipeline::generate_qwenimage(*model, config, scheduler, *conditioning, options);
    return std::make_pair(r.latents, LoopStats{r.step_seconds, false, 0, 0});
  };
}

// The tensor `name` of `tensors` when there, else undefined.
Tensor tensor_or_none(const nn::TensorMap& tensors, const std::string& name) {
  auto it = tensors.find(name);
  return it == tensors.end() ? Tensor() : it->second;
}

// WanPipeline's loop, and with `image` (wan_image_conditioning's) WanImageToVideoPipeline's and
// SkyReelsV2ImageToVideoPipeline's.
RankLoop wan_loop(const GenerateArgs& args, const Source& source, const RankLayout& layout, const nn::TensorMap& text,
                  const pipeline::WanImageConditioning& image) {
  const models::wan::WanConfig& config = video_config(source);
  auto conditioning = std::make_shared<pipeline::WanImageConditioning>(image);
  return video_loop(args, source, layout, text, 5.0f,  // the default guidance of all three
                    [&config, &source, conditioning](const nn::Model& model, const Tensor& embeds,
                                                     const pipeline::WanGenerateOptions& o) {
                      pipeline::UniPCMultistepScheduler scheduler(source.wan_scheduler);
                      pipeline::WanGenerateOptions options = o;
                      options.image = *conditioning;
                      return pipeline::generate_wan(model, config, scheduler, embeds, options);
                    });
}

// `images`: skyreels_image_latents'.
RankLoop skyreels_loop(const GenerateArgs& args, const Source& source, const RankLayout& layout,
                       const nn::TensorMap& text, const nn::TensorMap& images) {
  const auto& config = pipeline::config_of<models::skyreels_v2::SkyReelsV2Config>(source.model);
  auto first = std::make_shared<Tensor>(tensor_or_none(images, "first"));
  auto last = std::make_shared<Tensor>(tensor_or_none(images, "last"));
  return video_loop(args, source, layout, text, 6.0f,  // SkyReelsV2DiffusionForcingPipeline's default guidance
                    [&config, &source, &args, first, last](const nn::Model& model, const Tensor& embeds,
                                                           const pipeline::WanGenerateOptions& o) {
                      pipeline::SkyReelsGenerateOptions options;
                      options.video = o;
                      options.ar_step = args.ar_step;
                      options.fps = frame_rate(args, pipeline::PipelineKind::skyreels_v2);
                      options.base_frames = args.base_num_frames;
                      options.overlap_history = args.overlap_history;
                      options.addnoise_condition = args.addnoise_condition;
                      options.first_image_latents = *first;
                      options.last_image_latents = *last;
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
    options.frame_rate = double(frame_rate(args, pipeline::PipelineKind::ltx_video));
    options.guidance_scale = guidance;
    options.vae = source.ltx_vae;
    options.cfg = &ranked.mesh.cfg();
    pipeline::LtxGenerateResult r = pipeline::generate_ltx(*ranked.model, config, scheduler, *conditioning, options);
    return std::make_pair(r.latents, LoopStats{r.step_seconds, false, 0, 0});
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
  return pipeline::encode_stage(stages, encode, threads, launched_processes().get());
}

}  // namespace

bool video_pipeline(pipeline::PipelineKind kind) {
  return wan_family(kind) || kind == pipeline::PipelineKind::ltx_video;
}

int64_t frame_rate(const GenerateArgs& args, pipeline::PipelineKind kind) {
  if (args.fps) return *args.fps;
  switch (kind) {
    case pipeline::PipelineKind::ltx_video: return pipeline::kLtxFramesPerSecond;
    case pipeline::PipelineKind::skyreels_v2: return 24;  // SkyReelsV2DiffusionForcingPipeline's fps input
    default: return pipeline::kWanFramesPerSecond;
  }
}

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
    // A strength that leaves no step is refused before the image is encoded.
    if (!args.init_image.empty()) pipeline::skipped_steps(args.steps, args.strength.value_or(0.6));
    CPDIT_CHECK(args.init_image.empty() || !video, invalid_argument,
                "--init-image is for FLUX.1 and Qwen-Image image-to-image; ", source.name, " is a ",
                source.model.class_name);
    if (!args.init_image.empty() && (args.height == 0 || args.width == 0)) {
      // FluxImg2ImgPipeline's default size: the image's, down to whole packed latents.
      const io::RgbImage png = io::read_png(args.init_image);
      const int64_t unit = 2 * source.vae_scale_factor;
      if (args.height == 0) args.height = png.height / unit * unit;
      if (args.width == 0) args.width = png.width / unit * unit;
    }
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
    CPDIT_CHECK(std::isnan(args.guidance_2) || source.low_noise, invalid_argument,
                "--guidance-2 is for Wan 2.2's low-noise expert (a pipeline folder with transformer_2/); ", source.name,
                " has one transformer");
    CPDIT_CHECK(ltx || (args.decode_timestep == 0.0f && !args.decode_noise_scale), invalid_argument,
                "--decode-timestep and --decode-noise-scale are for LTX-Video's timestep-conditioned VAE");
    CPDIT_CHECK(args.first_image.empty() || diffusion_forcing(source) || conditions_on_image(source), invalid_argument,
                "--first-image is for Wan 2.1 and SkyReels-V2 image-to-video (more in_channels than out_channels) and "
                "SkyReels-V2 diffusion forcing (in_channels equal to out_channels); ", source.name, " is a ",
                source.model.class_name,
                wan ? " of in_channels " + std::to_string(video_config(source).in_channels) : std::string());
    if (conditions_on_image(source)) {
      const models::wan::WanConfig& config = video_config(source);
      CPDIT_CHECK(!args.first_image.empty(), invalid_argument, source.name, " is an image-to-video ",
                  source.model.class_name, " (in_channels ", config.in_channels,
                  "): give the clip's first frame with --first-image");
      // With CLIP tokens, a model reads one image's (I2V) or the first and last image's together (FLF2V:
      // pos_embed_seq_len); without them the last image enters through the condition alone.
      const bool needs_last = config.image_dim > 0 && config.pos_embed_seq_len > 0;
      CPDIT_CHECK(config.image_dim == 0 || needs_last == !args.last_image.empty(), invalid_argument, source.name,
                  needs_last ? " is a first-last-frame model (pos_embed_seq_len set): give --last-image too"
                             : " conditions on one image's CLIP tokens: --last-image needs a first-last-frame model");
    }
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
    const RankLoop loop = conditions_on_image(source)
                              ? wan_loop(args, source, info.layout, text, wan_image_conditioning(args, parts, video_config(source), source.wan_vae.temporal))
                          : source.pipeline == pipeline::PipelineKind::skyreels_v2
                              ? skyreels_loop(args, source, info.layout, text, skyreels_image_latents(args, parts))
                          : wan  ? wan_loop(args, source, info.layout, text, {})
                          : ltx  ? ltx_loop(args, source, info.layout, text)
                          : qwen ? qwenimage_loop(args, source, info.layout, text, start_image(args, parts, source))
                                 : flux_loop(args, source, info.layout, text, start_image(args, parts, source));

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

}  // namespace cpdit::app
