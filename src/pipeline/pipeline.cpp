// Pipeline (pipeline.hpp): the family found when the pipeline opens; per run the defaults the request
// left open filled in and every size refused before a rank starts, then the stages: encode, the
// family's loop on every rank with the step hook all families share, decode.
#include "pipeline/finite_watch.hpp"

#include <cpdit/comm/launch.hpp>
#include <cpdit/comm/mesh.hpp>
#include <cpdit/comm/mpi.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/core/memory.hpp>
#include <cpdit/core/threads.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/io/model_files.hpp>
#include <cpdit/io/image.hpp>
#include <cpdit/nn/lora.hpp>
#include <cpdit/nn/text_kv_cache.hpp>
#include <cpdit/pipeline/image_start.hpp>
#include <cpdit/pipeline/pipeline.hpp>
#include <cpdit/pipeline/preset_pipelines.hpp>
#include <cpdit/pipeline/presets.hpp>
#include <cpdit/pipeline/same_across_ranks.hpp>

#include "pipeline/input_images.hpp"
#include "pipeline/memory_check.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

namespace cpdit::pipeline {
namespace {

namespace fs = std::filesystem;

std::optional<std::string> optional_path(const std::string& path) {
  return path.empty() ? std::nullopt : std::optional(path);
}

// `open` once, its model handed out to every caller after.
std::function<models::LoadedModel()> kept(const std::function<models::LoadedModel()>& open) {
  auto model = std::make_shared<models::LoadedModel>(open());
  return [model] { return *model; };
}

// The text encoders, each opened the first time the encode stage asks for it and kept after.
void keep_text_encoders(TextComponents& text) {
  auto cache = std::make_shared<std::map<std::string, models::LoadedModel>>();
  auto mutex = std::make_shared<std::mutex>();
  text.encoder = [open = text.encoder, cache, mutex](const std::string& component, const nn::LoadOptions& load) {
    std::lock_guard<std::mutex> lock(*mutex);
    auto it = cache->find(component);
    if (it == cache->end()) it = cache->emplace(component, open(component, load)).first;
    return it->second;
  };
}

// The bytes of every weight file under `path` (a file, or a folder and its subfolders).
double weight_file_bytes(const std::string& path) {
  if (path.empty()) return 0;
  std::error_code error;
  if (fs::is_regular_file(path, error)) return double(fs::file_size(path, error));
  double bytes = 0;
  for (auto it = fs::recursive_directory_iterator(path, error); !error && it != fs::recursive_directory_iterator();
       it.increment(error)) {
    const std::string ext = it->path().extension().string();
    if (it->is_regular_file(error) && (ext == ".safetensors" || ext == ".gguf" || ext == ".bin"))
      bytes += double(it->file_size(error));
  }
  return bytes;
}

// The same for every file a pipeline source names.
double weight_file_bytes(const PipelineSource& source) {
  double bytes = weight_file_bytes(source.model) + weight_file_bytes(source.transformer) + weight_file_bytes(source.vae);
  for (const TextEncoderFile& file : source.text_encoders) bytes += weight_file_bytes(file.path);
  return bytes;
}

// The adapters of a run on each transformer: the one, or Wan 2.2's high-noise and low-noise experts.
struct ExpertLoras {
  nn::LoraApplication transformer, transformer_2;
};

}  // namespace

bool lead_process() {
  if (!comm::launched_by_mpi()) return true;
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* rank = std::getenv(name)) return std::string(rank) == "0";
  return true;
}

struct Pipeline::State {
  PipelineSource source;
  const Family* family = nullptr;
  bool resident = false;
  nn::LoadOptions load;
  PipelineParts parts;
  PipelineFolder folder;
  FamilyDefaults defaults;  // the family's, a preset's, or a transformer file's own (Family::file_defaults)
  std::optional<Transformer> transformer;  // resident: opened once
  // The LoRA files read so far, by path, each kept while its file's size and time are unchanged.
  mutable std::mutex lora_mutex;
  mutable std::map<std::string, std::pair<std::string, std::shared_ptr<const nn::LoraFile>>> lora_files;

  // A file's size and time of change, which say whether the copy read before still holds.
  static std::string file_stamp(const std::string& path) {
    std::error_code error;
    return std::to_string(fs::file_size(path, error)) + "@" +
           std::to_string(fs::last_write_time(path, error).time_since_epoch().count());
  }

  std::shared_ptr<const nn::LoraFile> lora_file(const std::string& path) const {
    const std::string stamp = file_stamp(path);
    std::lock_guard<std::mutex> lock(lora_mutex);
    auto& [kept_stamp, file] = lora_files[path];
    if (!file || kept_stamp != stamp) {
      file = std::make_shared<const nn::LoraFile>(nn::read_lora(path));
      kept_stamp = stamp;
    }
    return file;
  }

  // The request's adapters on each expert's layers (Wan 2.2's low-noise transformer_2 takes those asked
  // for it, as diffusers' load_into_transformer_2), kept for the next run of the same adapters (merging
  // reads and copies every weight it touches).
  mutable std::pair<std::string, std::shared_ptr<const ExpertLoras>> kept_lora;

  ExpertLoras lora_application(const Request& r, const Transformer& t) const {
    if (r.loras.empty()) return {};
    std::vector<nn::LoraUse> uses[2];
    std::string key;
    for (const LoraChoice& choice : r.loras) {
      CPDIT_CHECK(!choice.low_noise || t.low_noise, invalid_argument, "LoRA ", choice.path, ": ", t.name,
                  " has no low-noise expert (transformer_2/) to take it");
      uses[choice.low_noise].push_back({lora_file(choice.path), choice.weight, choice.merge});
      char weight[64];
      std::snprintf(weight, sizeof weight, "%.17g%s%s", choice.weight, choice.merge ? " merged" : "",
                    choice.low_noise ? " low-noise" : "");
      key += choice.path + "\n" + file_stamp(choice.path) + "\n" + weight + "\n";
    }
    auto make = [&] {
      ExpertLoras loras;
      loras.transformer = nn::lora_application(*t.model.replica(), uses[0], t.model.original_names, t.name);
      if (!uses[1].empty())
        loras.transformer_2 = nn::lora_application(*t.low_noise->replica(), uses[1], t.low_noise->original_names,
                                                   t.name + " transformer_2");
      return loras;
    };
    if (!transformer) return make();  // staged: its weights are read again next run, so are merged ones
    std::lock_guard<std::mutex> lock(lora_mutex);
    if (!kept_lora.second || kept_lora.first != key) {
      kept_lora.second.reset();  // the old merged copies freed before the new ones are made
      kept_lora = {key, std::make_shared<const ExpertLoras>(make())};
    }
    return *kept_lora.second;
  }

  std::string name() const { return source.preset.empty() ? source.model : "preset " + source.preset; }

  // Where the transformer's weights are, and the config.json that overrides theirs (none: their own).
  std::string transformer_path() const { return source.transformer.empty() ? source.model : source.transformer; }
  std::optional<std::string> transformer_config() const {
    if (!source.config.empty() || source.transformer.empty()) return optional_path(source.config);
    const std::optional<std::string> folder = io::pipeline_component(source.model, "transformer");
    CPDIT_CHECK(folder && fs::is_regular_file(fs::path(*folder) / "config.json"), invalid_argument, source.model,
                " has no transformer/config.json to read ", source.transformer, " with (give the transformer's config)");
    return (fs::path(*folder) / "config.json").string();
  }

  // --vae FILE [--vae-config]: the VAE every decode (and image encode) opens, its config read now (the
  // family sizes latents from it), so a file that is no VAE is refused before anything loads.
  void open_vae_file() {
    CPDIT_CHECK(fs::is_regular_file(source.vae), invalid_argument, "--vae ", source.vae, " is not a file");
    CPDIT_CHECK(source.vae_config.empty() || fs::is_regular_file(source.vae_config), invalid_argument,
                "--vae-config ", source.vae_config, " is not a file");
    const std::optional<std::string> config = optional_path(source.vae_config);
    const std::string class_name = models::model_class(source.vae, config, "vae");
    CPDIT_CHECK(class_name.rfind("AutoencoderKL", 0) == 0, invalid_argument, "--vae ", source.vae, " is a ",
                class_name, ", not a VAE");
    const std::optional<nlohmann::json> read = models::checkpoint_config(io::resolve_model(source.vae, "vae", config));
    CPDIT_CHECK(read, internal, "--vae ", source.vae, ": no config read for its ", class_name);
    folder.vae_config = *read;
    folder.vae_source = source.vae;
    parts.vae = [file = source.vae, config] { return models::open_model(file, config, {}, "vae"); };
  }

  Transformer open_transformer() const {
    Transformer t;
    t.name = name();
    t.preset = source.preset;
    t.model = source.preset.empty() ? models::open_model(transformer_path(), transformer_config(), load)
                                    : preset_model(source.preset, kPresetWeightsSeed ^ 0x5eedull, load);
    CPDIT_CHECK(t.model.class_name == family->transformer_class(), internal, t.name, " opened as ",
                t.model.class_name, ", not its family's ", family->transformer_class());
    t.scheduler_file = folder.scheduler_config;
    family->configure(t, folder, load);
    return t;
  }
};

Pipeline Pipeline::open(const PipelineSource& given, LoadPolicy policy, StageLog* log) {
  CPDIT_CHECK(given.model.empty() != given.preset.empty() || (given.model.empty() && !given.transformer.empty()),
              invalid_argument, "give exactly one of --model DIR|FILE, --preset NAME and --transformer FILE");
  // A transformer file with no pipeline folder is the model itself.
  PipelineSource source = given;
  if (source.model.empty() && source.preset.empty()) std::swap(source.model, source.transformer);
  auto s = std::make_shared<State>();
  s->source = source;
  s->load = nn::load_options(source.dtype);
  s->folder.model = source.model;
  s->folder.preset = source.preset;
  if (!source.preset.empty()) {
    // A preset is built with its own configs: a file given for one would be silently unused.
    CPDIT_CHECK(source.config.empty() && source.scheduler_config.empty() && source.transformer.empty() &&
                    source.vae.empty() && source.vae_config.empty() && source.text_encoders.empty() &&
                    source.tokenizers.empty(),
                invalid_argument, "--preset ", source.preset, " has its own configs and weights: --config, "
                "--scheduler-config, --vae, text encoder and tokenizer files and a transformer file are for --model");
    s->family = &family_for_preset(source.preset);
    s->defaults = s->family->defaults().of_preset();
    s->parts = PipelineParts::of_preset(source.preset);
  } else {
    std::vector<std::string> files{source.model, source.config,     source.scheduler_config,
                                   source.transformer, source.vae, source.vae_config};
    for (const TextEncoderFile& file : source.text_encoders) files.push_back(file.path);
    files.insert(files.end(), source.tokenizers.begin(), source.tokenizers.end());
    check_same_model_across_ranks(files);
    CPDIT_CHECK(fs::exists(source.model), invalid_argument, given.model.empty() ? "--transformer " : "--model ",
                source.model, " does not exist");
    CPDIT_CHECK(source.scheduler_config.empty() || fs::is_regular_file(source.scheduler_config), invalid_argument,
                "--scheduler-config ", source.scheduler_config, " is not a file");
    CPDIT_CHECK(source.transformer.empty() || fs::is_regular_file(source.transformer), invalid_argument,
                "the transformer file ", source.transformer, " does not exist");
    // A pipeline folder names its pipeline: one cpdit does not run is refused before anything is read.
    const bool folder = fs::is_regular_file(fs::path(source.model) / "model_index.json");
    const Family* named = folder ? &family_for_pipeline(pipeline_class_of(source.model)) : nullptr;
    const std::string transformer_class = models::model_class(s->transformer_path(), s->transformer_config());
    s->family = &family_for_class(transformer_class);
    CPDIT_CHECK(named == nullptr || named == s->family, invalid_argument, source.model, " holds a ",
                pipeline_class_of(source.model), " whose transformer is a ", transformer_class, ", which the ",
                named ? named->pipeline_classes().front() : "", " pipeline does not run");
    s->defaults = s->family->defaults();
    // A transformer file with no pipeline folder runs as the release its config says it is.
    if (!folder)
      if (const std::optional<nlohmann::json> config = models::checkpoint_config(
              io::resolve_model(s->transformer_path(), "transformer", s->transformer_config())))
        s->defaults = s->family->file_defaults(*config);
    s->parts = PipelineParts::of_folder(source.model);
    if (!source.text_encoders.empty() || !source.tokenizers.empty())
      s->parts.text = TextComponents::with_files(source.model, folder ? pipeline_class_of(source.model)
                                                                      : s->family->pipeline_classes().front(),
                                                 source.text_encoders, source.tokenizers);
    // A diffusers pipeline folder holds scheduler/ and vae/; a transformer alone has neither.
    const std::optional<std::string> scheduler = io::pipeline_component(source.model, "scheduler");
    const fs::path scheduler_file = !source.scheduler_config.empty() ? fs::path(source.scheduler_config)
                                    : scheduler ? fs::path(*scheduler) / "scheduler_config.json"
                                                : fs::path();
    if (!scheduler_file.empty() && fs::is_regular_file(scheduler_file)) s->folder.scheduler_config = scheduler_file;
    CPDIT_CHECK(source.vae_config.empty() || !source.vae.empty(), invalid_argument,
                "--vae-config is the config of a --vae FILE; a folder's vae/ has its own");
    if (!source.vae.empty()) {
      s->open_vae_file();
    } else if (const std::optional<std::string> vae = io::pipeline_component(source.model, "vae")) {
      if (fs::is_regular_file(fs::path(*vae) / "config.json")) {
        s->folder.vae_source = (fs::path(*vae) / "config.json").string();
        s->folder.vae_config = io::read_json(s->folder.vae_source);
      }
    }
  }
  // Presets are built in memory (staged, every run would build them again); a folder stays when its
  // weights take at most half of what this machine has free.
  s->resident = policy == LoadPolicy::resident ||
                (policy == LoadPolicy::automatic &&
                 (!source.preset.empty() || 2 * weight_file_bytes(source) <= available_memory_bytes()));
  if (s->resident) {
    auto load_all = [&] {
      const ScopedMatmulPrecision precision(nn::matmul_precision_for(source.dtype));
      s->transformer = s->open_transformer();
      if (s->parts.vae) s->parts.vae = kept(s->parts.vae);
      if (s->parts.image_encoder) s->parts.image_encoder = kept(s->parts.image_encoder);
      if (s->parts.text) keep_text_encoders(*s->parts.text);
    };
    if (log) log->run("load", load_all);
    else load_all();
  }
  return Pipeline(std::move(s));
}

const Family& Pipeline::family() const { return *state_->family; }
bool Pipeline::resident() const { return state_->resident; }
bool Pipeline::has_vae() const { return bool(state_->parts.vae); }
models::LoadedModel Pipeline::vae() const {
  CPDIT_CHECK(state_->parts.vae, invalid_argument, name(),
              " has no vae/ (give a diffusers pipeline folder, --vae FILE or a preset)");
  return state_->parts.vae();
}
bool Pipeline::has_text_encoders() const { return state_->parts.text.has_value(); }
const PipelineSource& Pipeline::source() const { return state_->source; }
std::string Pipeline::name() const { return state_->name(); }

namespace {

// The text embeddings: the request's, the prompt through the pipeline's text encoders (the encode
// stage: under mpirun on rank 0 alone, which may use this machine's cores while the other processes
// wait for its tensors), or none (the loops then use random embeddings).
nn::TensorMap text_embeddings(const Request& r, const PipelineParts& parts, const std::string& name,
                              const nn::LoadOptions& load, StageLog& stages) {
  if (!r.embeddings.empty()) return r.embeddings;
  if (!r.prompt) return {};
  const PromptEncoding encoding{*r.prompt, r.negative_prompt, r.text_tokens, load};
  auto encode = [&] {
    CPDIT_CHECK(parts.text, invalid_argument, "--prompt needs the pipeline's text encoders: ", name,
                " has no tokenizer/ and text_encoder/ (give --embeddings instead)");
    return encode_prompt(*parts.text, encoding);
  };
  const int threads = r.parallel.threads > 0 ? r.parallel.threads : hardware_threads();
  return encode_stage(stages, encode, threads, launched_processes().get());
}

// The sizes, frames and steps the request left open, as the family's pipeline defaults them.
// The defaults only the opened transformer tells: an image-to-image run's size (its picture's, in whole
// packed latents of the VAE), and the guidance (FLUX.1-dev's embedding or none). Pipeline::check filled
// the rest.
void fill_defaults(Request& r, const Family& family, const Transformer& t) {
  if (!r.init_image.empty() && (r.height == 0 || r.width == 0)) {
    // FluxImg2ImgPipeline's default size: the image's, down to whole packed latents.
    const io::RgbImage image = io::read_image(r.init_image);
    const int64_t unit = 2 * t.vae_scale_factor;
    CPDIT_CHECK((r.height > 0 || image.height >= unit) && (r.width > 0 || image.width >= unit), invalid_argument,
                "--init-image ", r.init_image, " is ", image.width, "x", image.height, ": smaller than one packed "
                "latent (", unit, " pixels a side) in the size it gives the run; give --height and --width");
    if (r.height == 0) r.height = image.height / unit * unit;
    if (r.width == 0) r.width = image.width / unit * unit;
  }
  family.fill_guidance(r, t);
}

// --cfg-scale as the family's classifier-free guidance: the video families' guidance, the image
// families' true CFG (before anything is encoded, so a clash costs nothing).
void apply_cfg_scale(Request& r, const Family& family, const std::string& name) {
  if (std::isnan(r.cfg_scale)) return;
  float& scale = family.video() ? r.guidance : r.true_cfg_scale;
  CPDIT_CHECK(std::isnan(scale), invalid_argument, "--cfg-scale is ", name, "'s ",
              family.video() ? "--guidance" : "--true-cfg-scale", ": give one of them");
  scale = r.cfg_scale;
}

// What every family refuses alike: options it has no use for.
void check_options(const Request& r, const Family& family, const Transformer& t) {
  CPDIT_CHECK(family.video() || r.frames == 0, invalid_argument, "--frames is for video models; ", t.name,
              " is an image model");
  CPDIT_CHECK(!family.video() || std::isnan(r.true_cfg_scale), invalid_argument,
              "--true-cfg-scale is for FLUX.1 and Qwen-Image; Wan's classifier-free guidance is --guidance, as "
              "LTX-Video's");
  CPDIT_CHECK(std::isnan(r.guidance_2) || t.low_noise, invalid_argument,
              "--guidance-2 is for Wan 2.2's low-noise expert (a pipeline folder with transformer_2/); ", t.name,
              " has one transformer");
  CPDIT_CHECK(family.takes_decode_timestep() || (r.decode_timestep == 0.0f && !r.decode_noise_scale),
              invalid_argument, "--decode-timestep and --decode-noise-scale are for LTX-Video's timestep-conditioned VAE");
  CPDIT_CHECK(r.first_image.empty() || family.takes_first_image(), invalid_argument,
              "--first-image is for Wan 2.1 and SkyReels-V2 image-to-video (more in_channels than out_channels) and "
              "SkyReels-V2 diffusion forcing (in_channels equal to out_channels); ", t.name, " is a ",
              t.model.class_name);
}

// The request's step cache checked against the family and filled in: MagCache without ratios takes the
// family's released ones.
void resolve_step_cache(Request& r, const Family& family, const Transformer& t) {
  nn::StepCacheConfig& c = r.cache;
  if (c.kind == nn::StepCacheConfig::Kind::none) return;
  CPDIT_CHECK(family.takes_step_cache(), invalid_argument, "--cache does not apply to ", t.name, ", a ",
              t.model.class_name);
  CPDIT_CHECK(!t.low_noise, invalid_argument,
              "--cache on Wan 2.2's two experts is not supported: each would need its own cache state");
  if (c.kind == nn::StepCacheConfig::Kind::taylor_seer) {
    if (c.modules.empty()) c.modules = family.taylor_seer_modules();
    std::string patterns;
    for (const std::string& m : c.modules) patterns += (patterns.empty() ? "" : " ") + m;
    CPDIT_CHECK(!nn::matching_modules(*t.model.replica(), c.modules).empty(), invalid_argument,
                "TaylorSeer: no module of ", t.model.class_name, " matches ", patterns,
                " (give module=REGEX, matched against diffusers' module paths such as transformer_blocks.0.attn)");
    return;
  }
  if (c.kind != nn::StepCacheConfig::Kind::mag || c.calibrate || !c.mag_ratios.empty()) return;
  c.mag_ratios = family.mag_ratios();
  CPDIT_CHECK(!c.mag_ratios.empty(), invalid_argument, "MagCache on ", t.model.class_name,
              " needs its per-step ratios: run once with --cache magcache:calibrate, then pass what it prints "
              "(magcache:THRESHOLD,ratios=a/b/c)");
}

// This rank's (cfg, ring, Ulysses) mesh over `world` and its replicas, on the backend asked for, its
// tokens split over its CFG group when that has more than one rank (by the family's plan, else the
// model's own).
RankRun rank_run(comm::Communicator& world, const Request& r, const Family& family, const Transformer& t,
                 const parallel::RankLayout& layout, const ExpertLoras& loras) {
  const parallel::ContextParallelConfig& c = layout.config;
  RankRun run{world, comm::Mesh(world.split(0, world.rank()), c.ring_degree, c.ulysses_degree, c.cfg_degree),
              t.model.replica(), t.low_noise ? t.low_noise->replica() : nullptr, {}};
  for (nn::Model* model : {run.model.get(), run.low_noise.get()}) {
    if (model == nullptr) continue;
    nn::apply_lora(*model, model == run.model.get() ? loras.transformer : loras.transformer_2);
    if (!r.parallel.backend.empty()) model->set_attention_backend(r.parallel.backend);
    if (run.mesh.flat().size() > 1) model->enable_parallelism(run.mesh.flat_group(), c, family.plan());
    if (r.cache.kind == nn::StepCacheConfig::Kind::taylor_seer) nn::hook_taylor_seer(*model, r.cache);
  }
  return run;
}

// Thrown on every rank at once, after the same step, when the ranks agree that the run was cancelled.
struct Cancelled {
  int steps_done;
};

}  // namespace

Request Pipeline::check(Request r) const {
  const State& s = *state_;
  const Family& family = *s.family;
  const FamilyDefaults& d = s.defaults;
  if (r.text_tokens == 0) r.text_tokens = d.text_tokens;
  apply_cfg_scale(r, family, s.name());
  family.check_request(r, s.folder);
  check_scheduler_choice(r.scheduler, family.scheduler_choices(), family.name());
  for (const LoraChoice& lora : r.loras) {
    CPDIT_CHECK(std::isfinite(lora.weight), invalid_argument, "LoRA ", lora.path, ": weight ", lora.weight,
                " is not a finite number");
    CPDIT_CHECK(fs::is_regular_file(lora.path), invalid_argument, "LoRA ", lora.path, ": no such file");
  }
  CPDIT_CHECK(r.decode != Decode::yes || s.parts.vae, invalid_argument, "decoding needs the pipeline's VAE: ",
              s.name(), " has no vae/ (give a diffusers pipeline folder, --vae FILE or a preset, or ask for the latents)");
  CPDIT_CHECK(r.prompt || !r.embeddings.empty() || r.random_embeddings || !s.source.preset.empty(), invalid_argument,
              "no prompt: give --prompt (or --embeddings from encode-prompt); --random-embeddings runs ", s.name(),
              " on random text embeddings, for testing");
  const size_t custom_sigmas = r.scheduler.sigmas.size();
  CPDIT_CHECK(custom_sigmas == 0 || r.steps == 0 || size_t(r.steps) == custom_sigmas, invalid_argument, "--steps ",
              r.steps, " with ", custom_sigmas, " --sigmas: give one of them (the sigmas' count is the steps)");
  if (r.steps == 0) r.steps = custom_sigmas ? int(custom_sigmas) : d.steps;
  if (r.scheduler.name.empty()) r.scheduler.name = family.scheduler_choices().front();
  // A strength that leaves no step is refused before the image is encoded.
  if (!r.init_image.empty()) skipped_steps(r.steps, r.strength.value_or(0.6));
  CPDIT_CHECK(r.init_image.empty() || family.takes_init_image(), invalid_argument,
              "--init-image is for FLUX.1 and Qwen-Image image-to-image; ", s.name(), " is a ",
              family.transformer_class());
  if (r.init_image.empty()) {  // an image-to-image run's size defaults to its picture's (fill_defaults)
    if (r.height == 0) r.height = d.height;
    if (r.width == 0) r.width = d.width;
  }
  if (r.frames == 0 && family.video()) r.frames = d.frames;
  // A resident transformer tells the rest now, as run() would find it: sizes, the family's own options
  // and whether the run fits in memory (a server refuses such a request before it queues it).
  if (s.transformer) {
    Request sized = r;
    fill_defaults(sized, family, *s.transformer);
    check_options(sized, family, *s.transformer);
    family.check(sized, *s.transformer);
    family.check_fits(sized, *s.transformer);
  }
  return r;
}

Result Pipeline::run(Request request, StageLog& stages) const {
  const State& s = *state_;
  const Family& family = *s.family;
  const bool lead = lead_process();
  const ScopedMatmulPrecision precision(nn::matmul_precision_for(s.source.dtype));
  Request r = check(std::move(request));
  const nn::TensorMap text = text_embeddings(r, s.parts, s.name(), s.load, stages);

  Result result;
  result.family = &family;
  result.model_name = s.name();
  std::optional<int> cancelled_after;
  stages.run("denoise", [&] {
    std::optional<Transformer> staged;
    if (!s.transformer) staged = s.open_transformer();
    const Transformer& t = s.transformer ? *s.transformer : *staged;
    fill_defaults(r, family, t);
    check_options(r, family, t);
    family.check(r, t);
    resolve_step_cache(r, family, t);
    const ExpertLoras loras = s.lora_application(r, t);
    // Sizes are refused here, before any rank starts, and so is a run that cannot fit in memory.
    family.check_fits(r, t);
    result.layout = parallel::resolve_layout(r.parallel, t.model.heads, hardware_threads());
    if (lead) stages.warn(parallel::oversubscription_warning(result.layout, hardware_threads()));
    const LoopInputs inputs{r, t, result.layout, text, s.parts, t.name};
    const RankLoop loop = family.loop(inputs);

    comm::LocalOptions local;
    local.threads_per_rank = result.layout.threads_per_rank;
    std::mutex kept;
    comm::run_ranks(
        result.layout.ranks,
        [&](comm::Communicator& world) {
          CPDIT_CHECK(world.size() == result.layout.ranks, internal, "expected ", result.layout.ranks,
                      " ranks, got ", world.size());
          memory::reset_peak();
          RankRun run = rank_run(world, r, family, t, result.layout, loras);
          FiniteWatch finite({run.model.get(), run.low_noise.get()}, "denoise", r.check_finite);
          // The step callback runs on rank 0; whether there is one, the ranks agree once (under mpirun each
          // process has its own request), so that all or none of them take part in it after each step.
          const bool first = world.rank() == 0 && lead;
          int64_t edits = bool(r.on_step_latents);
          if (world.size() > 1) world.broadcast(&edits, sizeof edits, 0);
          // The one step hook: the NaN watch, the step callback, progress, then whether any rank was asked
          // to stop (every rank takes the same answer, so all stop after the same step and none waits on
          // another).
          run.on_step = [&](int step, int total, double seconds, const StepLatents& latents) {
            finite.step_done();
            if (edits) edit_step_latents(first ? r.on_step_latents : nullptr, step, latents, world);
            if (r.on_step && first) r.on_step(step, total, seconds);
            // The latents after the step: the transformer's output was finite (the watch), but the guidance
            // combination or the scheduler after it may overflow (a guidance scale of 1e308). Agreed with
            // the stop flags, so every rank ends together, whichever part holds the overflow.
            int64_t stop[3] = {r.cancel != nullptr && r.cancel->load(std::memory_order_relaxed),
                               r.finish != nullptr && r.finish->load(std::memory_order_relaxed),
                               latents.latents != nullptr && !all_finite(*latents.latents)};
            if (world.size() > 1) world.all_reduce(stop, 3, DType::i64, comm::ReduceOp::max);
            CPDIT_CHECK(stop[2] == 0, invalid_argument, "denoise step ", step + 1,
                        ": the latents hold NaN or Inf after the guidance and the scheduler step (is a guidance "
                        "scale too large?)");
            if (stop[0]) throw Cancelled{step + 1};
            return stop[1] == 0 || latents.latents == nullptr;
          };
          std::pair<Tensor, LoopStats> mine;
          // This rank's step cache, its state per guidance pass, bound on the rank's thread for the loop.
          std::unique_ptr<nn::StepCache> cache;
          if (r.cache.kind != nn::StepCacheConfig::Kind::none) cache = std::make_unique<nn::StepCache>(r.cache, r.steps);
          nn::TextKvCache text_kv;
          try {
            const nn::ScopedStepCache bound(cache.get());
            const nn::ScopedTextKvCache bound_kv(r.text_kv_cache ? &text_kv : nullptr);
            mine = loop(run);
          } catch (const Cancelled& c) {
            std::lock_guard<std::mutex> lock(kept);
            cancelled_after = c.steps_done;
            return;
          }
          std::vector<int64_t> rank_peaks(size_t(world.size()));
          int64_t peak = memory::peak_bytes();
          world.all_gather(&peak, sizeof peak, rank_peaks.data());
          stages.add_rank_peak(peak);
          if (r.text_kv_cache) {
            int64_t kv[2] = {run.mesh.rank() == 0 ? text_kv.reused() : 0, run.mesh.rank() == 0 ? text_kv.projected() : 0};
            if (world.size() > 1) world.all_reduce(kv, 2, DType::i64, comm::ReduceOp::sum);
            std::lock_guard<std::mutex> lock(kept);
            result.text_kv_reused = kv[0];
            result.text_kv_projected = kv[1];
          }
          if (cache) {
            // The calls of the run: each CFG group's first rank counts its group's (all of its ranks
            // decided alike).
            const nn::StepCacheReport& report = cache->report();
            const bool counts = run.mesh.rank() == 0;
            int64_t calls[4] = {counts ? report.computed() : 0, counts ? report.skipped() : 0,
                                counts ? report.modules_computed() : 0, counts ? report.modules_predicted() : 0};
            if (world.size() > 1) world.all_reduce(calls, 4, DType::i64, comm::ReduceOp::sum);
            std::lock_guard<std::mutex> lock(kept);
            const size_t slot = comm::launched_by_mpi() ? 0 : size_t(world.rank());
            if (result.cache_reports.size() <= slot) result.cache_reports.resize(slot + 1);
            result.cache_reports[slot] = report;
            result.cache_computed = calls[0];
            result.cache_skipped = calls[1];
            result.cache_modules_computed = calls[2];
            result.cache_modules_predicted = calls[3];
          }
          // Every rank ends with the whole latents: rank 0's are kept (under mpirun, each process's own).
          if (world.rank() != 0 && !comm::launched_by_mpi()) return;
          std::lock_guard<std::mutex> lock(kept);
          result.latents = mine.first;
          result.loop = mine.second;
          result.peaks = rank_peaks;
        },
        local);
  });
  CPDIT_CHECK(!cancelled_after, interrupted, "generation cancelled after step ", cancelled_after.value_or(0), " of ",
              r.steps);

  // The decoded pixels, when there is a VAE and the request wants them.
  if (s.parts.vae && r.decode != Decode::no) {
    comm::LocalOptions local;
    local.threads_per_rank = result.layout.threads_per_rank;
    const DecodeTimestep decode_timestep{r.decode_timestep, r.decode_noise_scale, r.seed, {}};
    result.pixels =
        decode_stage(stages, s.parts.vae, result.latents, result.layout.ranks, local, decode_timestep, r.vae_split);
    if (result.pixels.defined() && lead) result.pixels = family.pixels(result.pixels);
  }
  result.request = std::move(r);
  result.request.on_step = nullptr;
  result.request.on_step_latents = nullptr;
  result.request.cancel = nullptr;
  result.request.finish = nullptr;
  return result;
}

}  // namespace cpdit::pipeline
