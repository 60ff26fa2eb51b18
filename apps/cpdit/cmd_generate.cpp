// cpdit generate: a prompt to a FLUX.1 or Qwen-Image image or a Wan or LTX-Video video across
// ranks, on a pipeline folder, a transformer checkpoint or a built-in preset. The flags make a
// pipeline::PipelineSource and Requests (one, or one per line of --prompts); the Pipeline
// (pipeline/pipeline.hpp) runs them and this command writes what they return. Only rank 0 prints and
// writes files; each request's outputs are written at its end and appear together (io::OutputBatch),
// so a failed run leaves nothing behind and every old output as it was.
#include "command.hpp"
#include "component_flags.hpp"
#include "dry_run.hpp"
#include "generate_batch.hpp"
#include "lora_flags.hpp"
#include "option_checks.hpp"
#include "output_paths.hpp"
#include "parallel_flags.hpp"
#include "progress.hpp"
#include "scheduler_flags.hpp"
#include "vae_split_option.hpp"
#include "write_outputs.hpp"
#include "weight_flags.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/atomic_file.hpp>
#include <cpdit/io/image.hpp>
#include <cpdit/io/png.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/io/video.hpp>
#include <cpdit/pipeline/picture_files.hpp>
#include <cpdit/pipeline/pipeline.hpp>
#include <cpdit/pipeline/preview.hpp>
#include <cpdit/pipeline/same_across_ranks.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <memory>

namespace cpdit::app {
namespace {

namespace fs = std::filesystem;
using pipeline::Family;
using pipeline::Request;

struct GenerateFlags {
  pipeline::PipelineSource source;
  Request request;
  std::string embeddings, latents;  // safetensors files: the text tensors, the initial noise (`latents`)
  Outputs outputs;
  std::string prompts;  // a batch: one request per line
  std::string cache;    // --cache's spec (nn::parse_step_cache)
  std::string text_kv_cache = "on";
  LoraFlags loras;
  ComponentFlags components;
  int64_t seed = 0;     // -1: drawn at random
  bool keep_loaded = false, staged = false, json = false, verbose = false, dry_run = false;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// An output's folder must exist: refused before the run, not after its minutes of work.
void check_output_path(const std::string& path, const char* flag) {
  if (path.empty()) return;
  fs::path parent = fs::path(path).parent_path();
  CPDIT_CHECK(parent.empty() || fs::is_directory(parent), invalid_argument, flag, " ", path, ": folder ",
              parent.string(), " does not exist");
}

void check_outputs(const Outputs& o) {
  // A folder may be named with a trailing slash ("frames/"): its parent must exist.
  auto folder_parent = [](const std::string& path) {
    const fs::path p(path);
    return (p.has_filename() ? p : p.parent_path()).string();
  };
  check_output_path(folder_parent(o.out), "--out");
  check_output_path(o.preview, "--preview");
  check_output_path(o.image, "--image");
  check_output_path(folder_parent(o.frames_dir), "--frames-dir");
  check_output_path(o.video, "--video");
  CPDIT_CHECK(o.video.empty() || o.video.ends_with(".mp4"), invalid_argument, "--video must end in .mp4, got '",
              o.video, "'");
}

// --out by its name's form: a picture (.png, .jpg, .jpeg, .webp) is --image, a .mp4 --video, a folder
// (a trailing slash, or one that exists) --frames-dir, a .safetensors the latents; another name, or a
// picture for a video model (or a clip for an image model), is refused naming what would fit.
void route_out(Outputs& o, const Family& family) {
  if (o.out.empty() || o.out.ends_with(".safetensors")) return;
  std::string* routed = nullptr;
  std::error_code error;
  const bool folder = o.out.ends_with("/") || fs::is_directory(o.out, error);
  if (pipeline::is_picture_name(o.out)) {
    CPDIT_CHECK(!family.video(), invalid_argument, "--out ", o.out, " is a picture, but this model makes video: name "
                "a .mp4, a folder/ for its frames, or a .safetensors for its latents");
    routed = &o.image;
  } else if (o.out.ends_with(".mp4") || folder) {
    CPDIT_CHECK(family.video(), invalid_argument, "--out ", o.out, " is ", folder ? "a folder of frames" : "a clip",
                ", but this model makes images: name a .png, .jpg or .webp, or a .safetensors for its latents");
    routed = folder ? &o.frames_dir : &o.video;
  } else {
    fail(ErrorKind::invalid_argument, "--out ", o.out, ": the name says no format cpdit writes (.png, .jpg, .webp, "
         ".mp4, a folder/ for frames, .safetensors for latents)");
  }
  const char* flag = routed == &o.image ? "--image" : routed == &o.video ? "--video" : "--frames-dir";
  CPDIT_CHECK(routed->empty(), invalid_argument, "--out ", o.out, " and ", flag, " ", *routed, " both name the ",
              routed == &o.image ? "image" : routed == &o.video ? "clip" : "frames", "; give one");
  *routed = o.out;
  o.out.clear();
}

// Where a run given no output writes (as stable-diffusion.cpp's output.png): output.png for an image,
// output.mp4 for a clip, output.safetensors (the latents) for a model without a VAE; a name already
// taken gets the first free _1, _2, ... so no earlier picture is replaced.
std::string default_output(const pipeline::Pipeline& pipe) {
  const std::string extension = !pipe.has_vae() ? ".safetensors" : pipe.family().video() ? ".mp4" : ".png";
  std::string name = "output" + extension;
  for (int i = 1; fs::exists(fs::symlink_status(name)); ++i) name = "output_" + std::to_string(i) + extension;
  return name;
}

// The outputs the family can make, refused by name otherwise.
void check_outputs_fit(const Outputs& o, const pipeline::Pipeline& pipe) {
  const Family& family = pipe.family();
  CPDIT_CHECK((o.image.empty() && o.frames_dir.empty() && o.video.empty()) || pipe.has_vae(), invalid_argument,
              "--image, --frames-dir and --video need the pipeline's VAE: ", pipe.name(),
              " has no vae/ (give a diffusers pipeline folder, --vae FILE or a preset)");
  CPDIT_CHECK(family.has_preview() || o.preview.empty(), invalid_argument,
              family.video() ? "--preview is for FLUX.1 images, not video latents"
                             : "--preview is for FLUX.1 latents, not Qwen-Image's");
  CPDIT_CHECK(!family.video() || o.image.empty(), invalid_argument,
              "--image is for images; write video with --frames-dir or --video");
  CPDIT_CHECK(family.video() || o.frames_dir.empty(), invalid_argument,
              "--frames-dir is for video; write an image with --image");
  CPDIT_CHECK(family.video() || o.video.empty(), invalid_argument, "--video is for video; write an image with --image");
}

// The files the flags name for the run to read (the model's own files aside).
std::vector<NamedPath> input_files(const GenerateFlags& g, const Request& r) {
  std::vector<NamedPath> files{{"--embeddings", g.embeddings},   {"--latents", g.latents},
                               {"--config", g.source.config},    {"--scheduler-config", g.source.scheduler_config},
                               {"--vae", g.source.vae},          {"--vae-config", g.source.vae_config},
                               {"--transformer", g.source.transformer},
                               {"--first-image", r.first_image}, {"--last-image", r.last_image},
                               {"--init-image", r.init_image},   {"--prompts", g.prompts}};
  for (const pipeline::LoraChoice& lora : r.loras) files.push_back({lora.low_noise ? "--lora-2" : "--lora", lora.path});
  for (const pipeline::TextEncoderFile& file : g.source.text_encoders) files.push_back({file.flag, file.path});
  for (const std::string& dir : g.source.tokenizers) files.push_back({"--tokenizer", dir});
  return files;
}

// Neither output may replace a file the run reads, nor the other output.
void refuse_overwriting_inputs(const GenerateFlags& g, const Request& r, const Outputs& o) {
  std::vector<NamedPath> inputs = input_files(g, r);
  if (!g.source.model.empty() && fs::exists(g.source.model))
    for (NamedPath& file : model_inputs("--model", g.source.model, "transformer",
                                        g.source.config.empty() ? std::nullopt : std::optional(g.source.config)))
      inputs.push_back(std::move(file));
  const std::vector<NamedPath> outputs{{"--out", o.out}, {"--preview", o.preview}, {"--image", o.image},
                                       {"--video", o.video}};
  refuse_overwrite(outputs, inputs);
  refuse_paths_inside({"--frames-dir", o.frames_dir}, inputs);
  refuse_paths_inside({"--frames-dir", o.frames_dir}, outputs);
}

// A guidance scale as JSON: null when the run had none (FLUX.1-schnell's guidance, a video's true CFG).
nlohmann::json scale_or_null(float scale) { return std::isnan(scale) ? nlohmann::json() : nlohmann::json(scale); }

// The closing summary: what was asked (prompt, sizes, steps, scheduler, guidance, seed), what ran
// (model, ranks), each stage's time and memory, the loop's step times, and the files written; printed
// as JSON with --json, else as the lines print_summary makes.
nlohmann::json summary(const pipeline::Result& run, const Outputs& o, const std::string& dtype,
                       const std::vector<pipeline::StageStats>& stages, double wall_seconds) {
  const parallel::RankLayout& layout = run.layout;
  const Request& r = run.request;
  const pipeline::LoopStats& result = run.loop;
  // Each stage holds only its own weights: the process's most is the largest stage's.
  int64_t weight_bytes = 0, peak_stage_bytes = 0;
  nlohmann::json stage_list = nlohmann::json::array();
  for (const pipeline::StageStats& st : stages) {
    weight_bytes = std::max(weight_bytes, st.weight_bytes);
    peak_stage_bytes = std::max(peak_stage_bytes, st.weight_bytes + st.activation_bytes);
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
  nlohmann::json j = {{"model", run.model_name},
                      {"prompt", r.prompt ? nlohmann::json(*r.prompt) : nlohmann::json()},
                      {"negative_prompt", r.negative_prompt ? nlohmann::json(*r.negative_prompt) : nlohmann::json()},
                      {"text", r.prompt ? "prompt" : !r.embeddings.empty() ? r.embeddings_source : "random embeddings"},
                      {"height", r.height},
                      {"width", r.width},
                      {"steps", steps},
                      {"scheduler", pipeline::scheduler_that_ran(run)},
                      {"guidance", scale_or_null(r.guidance)},
                      {"true_cfg_scale", scale_or_null(r.true_cfg_scale)},
                      {"seed", r.seed},
                      {"dtype", dtype},
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
                      {"peak_stage_bytes", peak_stage_bytes},
                      {"peak_activation_bytes_per_rank", run.peaks},
                      {"latents_sharded_between_steps", result.latents_sharded}};
  if (run.family->video()) j["frames"] = r.frames;
  if (result.latents_sharded) {
    // diffusers gathers the model output at every step; keeping the latents sharded leaves one
    // gather in all.
    j["latents_gather_seconds"] = result.gather_seconds;
    j["latents_gather_bytes"] = result.gather_bytes;
    j["gathers_avoided"] = std::max(steps - 1, 0);
    j["gather_bytes_avoided"] = int64_t(std::max(steps - 1, 0)) * result.gather_bytes;
  }
  if (r.cache.kind != nn::StepCacheConfig::Kind::none) {
    // Each branch's calibrated ratios from the first rank that ran it (under CFG-parallel the two
    // passes run on different ranks; under mpirun this process has its own only).
    nlohmann::json ratios = nlohmann::json::array();
    for (size_t branch = 0; branch < 2; ++branch)
      for (const nn::StepCacheReport& report : run.cache_reports)
        if (report.calibrated_ratios.size() > branch && !report.calibrated_ratios[branch].empty()) {
          ratios.push_back({{"pass", branch == 0 ? "cond" : "uncond"}, {"ratios", report.calibrated_ratios[branch]}});
          break;
        }
    j["cache"] = {{"spec", nn::step_cache_name(r.cache)},
                  {"calls_computed", run.cache_computed},
                  {"calls_skipped", run.cache_skipped},
                  {"mag_ratios", ratios}};
    if (r.cache.kind == nn::StepCacheConfig::Kind::taylor_seer) {
      j["cache"]["modules_computed"] = run.cache_modules_computed;
      j["cache"]["modules_predicted"] = run.cache_modules_predicted;
    }
  }
  if (r.text_kv_cache && run.text_kv_reused + run.text_kv_projected > 0)
    j["text_kv_cache"] = {{"reused", run.text_kv_reused}, {"projected", run.text_kv_projected}};
  if (!r.loras.empty()) {
    j["loras"] = nlohmann::json::array();
    for (const pipeline::LoraChoice& lora : r.loras)
      j["loras"].push_back(
          {{"path", lora.path}, {"weight", lora.weight}, {"merged", lora.merge}, {"low_noise_expert", lora.low_noise}});
  }
  if (!o.out.empty()) j["out"] = o.out;
  if (!o.preview.empty()) j["preview"] = o.preview;
  if (!o.image.empty()) j["image"] = o.image;
  if (!o.frames_dir.empty()) j["frames_dir"] = o.frames_dir;
  if (!o.video.empty()) j["video"] = o.video;
  return j;
}

// What the user asked and got first; the engine's detail (ranks, stages, memory) with --verbose.
void print_summary(const nlohmann::json& s, bool verbose) {
  auto mib = [](int64_t bytes) { return double(bytes) / (1 << 20); };
  if (s["prompt"].is_string()) std::printf("prompt       %s\n", s["prompt"].get<std::string>().c_str());
  else std::printf("text         %s\n", s["text"].get<std::string>().c_str());
  if (s["negative_prompt"].is_string() && !s["negative_prompt"].get<std::string>().empty())
    std::printf("negative     %s\n", s["negative_prompt"].get<std::string>().c_str());
  std::string frames = s.contains("frames") ? " x " + std::to_string(int(s["frames"])) + " frames" : "";
  std::string guidance;
  char number[64];
  for (const char* scale : {"guidance", "true_cfg_scale"})
    if (s[scale].is_number()) {
      std::snprintf(number, sizeof number, ", %s %g", scale == std::string("guidance") ? "guidance" : "true CFG",
                    double(s[scale]));
      guidance += number;
    }
  std::printf("made         %lldx%lld%s, %d steps of %s%s, seed %llu\n", (long long)s["width"],
              (long long)s["height"], frames.c_str(), int(s["steps"]), s["scheduler"].get<std::string>().c_str(),
              guidance.c_str(), (unsigned long long)s["seed"]);
  std::printf("model        %s (%s)\n", s["model"].get<std::string>().c_str(), s["dtype"].get<std::string>().c_str());
  std::printf("time         %s wall, %.3f s per step on %d %s rank%s\n", format_duration(s["wall_seconds"]).c_str(),
              double(s["seconds_per_step"]), int(s["ranks"]), s["engine"].get<std::string>().c_str(),
              int(s["ranks"]) == 1 ? "" : "s");
  if (s.contains("loras"))
    for (const nlohmann::json& lora : s["loras"])
      std::printf("lora         %s at weight %g%s%s\n", lora["path"].get<std::string>().c_str(), double(lora["weight"]),
                  lora["merged"] ? ", merged" : "", lora["low_noise_expert"] ? ", on the low-noise expert" : "");
  if (s.contains("text_kv_cache")) {
    const int64_t reused = s["text_kv_cache"]["reused"], projected = s["text_kv_cache"]["projected"];
    std::printf("text kv      %lld of %lld cross-attention key/value projections reused\n", (long long)reused,
                (long long)(reused + projected));
  }
  if (s.contains("cache")) {
    const nlohmann::json& c = s["cache"];
    const int64_t computed = c["calls_computed"], skipped = c["calls_skipped"];
    std::printf("cache        %s: %lld of %lld transformer calls computed, %lld skipped\n",
                c["spec"].get<std::string>().c_str(), (long long)computed, (long long)(computed + skipped),
                (long long)skipped);
    if (c.contains("modules_predicted"))
      std::printf("             (%lld hooked module calls computed, %lld predicted)\n",
                  (long long)c["modules_computed"], (long long)c["modules_predicted"]);
    // Ready to pass back: --cache magcache:THRESHOLD,ratios=... (f32 values in full).
    for (const nlohmann::json& pass : c["mag_ratios"]) {
      std::string list;
      for (double v : pass["ratios"]) {
        std::snprintf(number, sizeof number, "%s%.9g", list.empty() ? "" : "/", v);
        list += number;
      }
      std::printf("mag ratios   %s: ratios=%s\n", pass["pass"].get<std::string>().c_str(), list.c_str());
    }
  }
  if (verbose) {
    std::printf("parallelism  %d %s ranks, %sring %d x ulysses %d (%s), %d threads per rank\n", int(s["ranks"]),
                s["engine"].get<std::string>().c_str(),
                int(s["cfg"]) > 1 ? ("cfg " + std::to_string(int(s["cfg"])) + " x ").c_str() : "", int(s["ring"]),
                int(s["ulysses"]), s["rotate"].get<std::string>().c_str(), int(s["threads_per_rank"]));
    std::printf("steps        fastest %.3f s, %.3f s in the loop\n", double(s["fastest_step_seconds"]),
                double(s["loop_seconds"]));
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
  }
  if (s.contains("out")) std::printf("wrote        %s\n", s["out"].get<std::string>().c_str());
  for (const char* file : {"preview", "image", "frames_dir", "video"})
    if (s.contains(file)) std::printf("wrote        %s\n", s[file].get<std::string>().c_str());
}

// Names each stage on stderr as it ends (the denoise loop adds its own step lines); a failure is then
// the only line of a stage that has not ended.
void report_stages(pipeline::StageLog& stages, bool silent) {
  stages.on_warning = [](const std::string& message) { std::fprintf(stderr, "cpdit: warning: %s\n", message.c_str()); };
  if (silent) return;
  // The stage's time and the weights it held, so that a long silent load says what it loaded.
  stages.on_end = [](const pipeline::StageStats& s) {
    std::fprintf(stderr, "%s done in %s, %s of weights\n", s.name.c_str(), format_duration(s.seconds).c_str(),
                 format_bytes(uint64_t(s.weight_bytes)).c_str());
  };
}

// The request's text and noise from the --embeddings and --latents files.
void read_input_files(const GenerateFlags& g, Request& r) {
  if (!g.embeddings.empty()) {
    r.embeddings = io::load_safetensors(g.embeddings);
    r.embeddings_source = g.embeddings;
  }
  if (!g.latents.empty()) {
    io::SafetensorsFile file = io::SafetensorsFile::open(g.latents);
    CPDIT_CHECK(file.contains("latents"), invalid_argument, g.latents, " has no tensor 'latents' (the initial noise)");
    r.initial_latents = file.get("latents").to(DType::f32);
  }
}

// A dry run's report of one request, as the pipeline would run it (pipe.check's defaults), and the
// files it would write.
std::vector<std::string> plan(const pipeline::Pipeline& pipe, const BatchItem& item) {
  const Request r = pipe.check(item.request);
  char line[256];
  std::snprintf(line, sizeof line, "make %s%lldx%lld%s, %d steps of %s, seed %llu, from %s",
                pipe.family().video() ? "a clip of " : "", (long long)r.width, (long long)r.height,
                r.frames ? (" x " + std::to_string(r.frames) + " frames").c_str() : "", r.steps,
                r.scheduler.name.c_str(), (unsigned long long)r.seed,
                r.prompt ? ("the prompt \"" + *r.prompt + "\"").c_str()
                : !r.embeddings.empty() ? r.embeddings_source.c_str() : "random embeddings");
  std::vector<std::string> lines{line};
  const Outputs& o = item.outputs;
  for (const std::string* file : {&o.out, &o.preview, &o.image, &o.frames_dir, &o.video})
    if (!file->empty()) lines.push_back("write " + *file);
  return lines;
}

void run(GenerateFlags g) {
  auto start = std::chrono::steady_clock::now();
  // The seed used is printed in the summary, so a random one can be given again.
  g.request.seed = g.seed == -1 ? pipeline::random_seed_across_ranks() : uint64_t(g.seed);
  if (!g.cache.empty()) g.request.cache = nn::parse_step_cache(g.cache);
  g.request.text_kv_cache = g.text_kv_cache == "on";
  g.request.loras = lora_choices(g.loras);
  apply_component_flags(g.components, g.source);
  const Request& r = g.request;
  check_outputs(g.outputs);
  CPDIT_CHECK(!r.fps || *r.fps <= 1000, invalid_argument, "--fps must be at most 1000, got ", *r.fps);
  CPDIT_CHECK(!(r.prompt && !g.embeddings.empty()), invalid_argument, "give --prompt or --embeddings, not both");
  CPDIT_CHECK(r.prompt || !r.negative_prompt || !g.prompts.empty(), invalid_argument,
              "--negative-prompt goes with --prompt");
  CPDIT_CHECK(r.last_image.empty() || !r.first_image.empty(), invalid_argument, "--last-image goes with --first-image");
  CPDIT_CHECK(!r.strength || !r.init_image.empty(), invalid_argument, "--strength goes with --init-image");
  CPDIT_CHECK(!(g.keep_loaded && g.staged), invalid_argument, "give --keep-loaded or --staged, not both");
  CPDIT_CHECK(g.prompts.empty() || (!r.prompt && g.embeddings.empty()), invalid_argument,
              "--prompts gives each request's prompt: drop --prompt and --embeddings");
  if (g.dry_run) {  // every missing input at once, not the first
    std::vector<NamedPath> inputs = input_files(g, r);
    inputs.push_back({"--model", g.source.model});
    refuse_missing(inputs);
  }
  // A missing or unreadable image is refused before any model loads.
  for (const std::string& image : {r.first_image, r.last_image, r.init_image})
    if (!image.empty()) io::read_image(image);
  std::vector<BatchItem> batch = g.prompts.empty() ? std::vector<BatchItem>{{r, g.outputs}}
                                                   : read_batch(g.prompts, r, g.outputs);
  const bool lead = pipeline::lead_process();
  // One request gains nothing from keeping a stage's models beyond it; a batch keeps them when they fit.
  const pipeline::LoadPolicy policy = g.keep_loaded && !g.dry_run           ? pipeline::LoadPolicy::resident
                                      : g.staged || g.dry_run || batch.size() == 1 ? pipeline::LoadPolicy::staged
                                                                                   : pipeline::LoadPolicy::automatic;
  pipeline::StageLog load;
  report_stages(load, g.json || !lead);
  const pipeline::Pipeline pipe = pipeline::Pipeline::open(g.source, policy, &load);
  if (batch.size() == 1 && !batch[0].outputs.any()) batch[0].outputs.out = default_output(pipe);
  for (BatchItem& item : batch) {
    route_out(item.outputs, pipe.family());
    check_outputs_fit(item.outputs, pipe);
    refuse_overwriting_inputs(g, item.request, item.outputs);
    read_input_files(g, item.request);
    item.request.decode = item.outputs.image.empty() && item.outputs.frames_dir.empty() && item.outputs.video.empty()
                              ? (item.outputs.out.empty() ? pipeline::Decode::no : pipeline::Decode::if_vae)
                              : pipeline::Decode::yes;
  }
  if (g.dry_run) {
    std::vector<std::string> lines{"open " + pipe.name() + " (" + pipe.family().pipeline_classes().front() + ")"};
    for (const BatchItem& item : batch)
      for (std::string& line : plan(pipe, item)) lines.push_back(std::move(line));
    if (lead) print_dry_run(lines);
    return;
  }
  const double load_seconds = seconds_since(start);
  for (size_t i = 0; i < batch.size(); ++i) {
    auto request_start = std::chrono::steady_clock::now();
    pipeline::StageLog stages;
    report_stages(stages, g.json || !lead);
    Progress progress("denoise", g.json || !lead);
    Request request = batch[i].request;
    request.on_step = [&progress](int step, int total, double seconds) { progress.step(step, total, seconds); };
    const pipeline::Result result = pipe.run(std::move(request), stages);
    if (!lead) continue;
    write_outputs(result, batch[i].outputs);
    // A single run's wall time counts from the command's start, its load included.
    const double wall = batch.size() == 1 ? seconds_since(start) : seconds_since(request_start);
    // A single run's summary counts the load with its stages; a batch's loaded once (print_batch_line).
    std::vector<pipeline::StageStats> stage_stats = batch.size() == 1 ? load.stages() : std::vector<pipeline::StageStats>{};
    stage_stats.insert(stage_stats.end(), stages.stages().begin(), stages.stages().end());
    nlohmann::json s = summary(result, batch[i].outputs, g.source.dtype, stage_stats, wall);
    if (g.json) std::printf("%s\n", s.dump().c_str());
    else print_summary(s, g.verbose);
  }
  if (lead && batch.size() > 1)
    print_batch_line(int(batch.size()), load.stages(), pipe.resident(), load_seconds, seconds_since(start), g.json);
  std::fflush(stdout);
}

void add_generate(CLI::App& parent) {
  auto args = std::make_shared<GenerateFlags>();
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
      "Text comes from --prompt or from --embeddings (the tensors encode-prompt writes, see --embeddings); presets "
      "without either (and models given --random-embeddings) run on deterministic random embeddings.\n"
      "Examples:\n"
      "  cpdit generate --preset flux-mini --prompt \"a red fox in the snow\" --image fox.png\n"
      "  cpdit generate --preset flux-mini --steps 4 --out latents.safetensors --preview preview.png\n"
      "  cpdit generate --model FLUX.1-dev/ --embeddings prompt.safetensors --ring 2 --ulysses 2 --out a.safetensors\n"
      "  cpdit generate --preset wan-mini --frames 17 --height 256 --width 256 --ranks 2 --out clip.safetensors\n"
      "  mpirun -np 4 cpdit generate --preset flux-tiny --ring 2 --ulysses 2 --out a.safetensors");
  CLI::Option_group* source = cmd->add_option_group("Model");
  source->add_option("-m,--model", args->source.model,
                     "a diffusers FLUX.1, Qwen-Image, Wan, SkyReels-V2 (diffusion forcing) or LTX-Video pipeline folder (model_index.json, transformer/, scheduler/), a "
                     "transformer folder, an index json, or one .safetensors file (e.g. the original FLUX.1 release)");
  source->add_option("--preset", args->source.preset,
                     "a built-in model with seeded random weights: flux-tiny, flux-mini, wan-tiny, wan-mini, qwen-mini, "
                     "skyreels-tiny, skyreels-mini, ltx-tiny or ltx-mini");
  source->require_option(1, 2);  // --transformer FILE alone, or with --model DIR
  cmd->add_option("--config", args->source.config, "transformer config.json overriding the checkpoint's or the inferred one");
  cmd->add_option("--scheduler-config", args->source.scheduler_config,
                  "scheduler_config.json (default: DIR/scheduler/, else FLUX.1-dev's)");
  add_component_flags(*cmd, *source, args->source, args->components);
  add_dtype_flag(*cmd, args->source.dtype);
  cmd->add_option("--steps", args->request.steps, "denoising steps (default: 4 for presets, 28 for FLUX.1, 50 for the others)")->check(whole_number<int>());
  add_scheduler_flags(*cmd, args->request.scheduler);
  cmd->add_option("-H,--height", args->request.height, "height in pixels, a multiple of 16 (LTX-Video: 32) (default: 256 for presets, 1024 for FLUX.1 and Qwen-Image, 480 for Wan, 512 for LTX-Video)")->check(whole_number<int64_t>());
  cmd->add_option("-W,--width", args->request.width, "width in pixels, a multiple of 16 (LTX-Video: 32) (default: 256 for presets, 1024 for FLUX.1 and Qwen-Image, 832 for Wan, 704 for LTX-Video)")->check(whole_number<int64_t>());
  cmd->add_option("--frames,--num-frames", args->request.frames, "video: frames of the clip, 4k + 1 for Wan (default: 5 for presets, 81 "
                  "otherwise), 8k + 1 for LTX-Video (default: 9 for presets, 161 otherwise)")->check(whole_number<int64_t>());
  cmd->add_option("-s,--seed", args->seed,
                  "seed of the initial noise (and of the random embeddings); -1 draws one at random, printed in "
                  "the summary (default: 0)")
      ->check(whole_number<int64_t>(-1));
  cmd->add_option("--guidance", args->request.guidance,
                  "the pipeline's guidance_scale: FLUX.1-dev's guidance embedding (default 3.5; 7.0 with "
                  "--init-image), Wan's classifier-free "
                  "guidance (default 5.0; SkyReels-V2 6.0; LTX-Video 3.0; runs when there are negative_prompt_embeds)")
      ->check(finite_number());
  cmd->add_option("--cfg-scale", args->request.cfg_scale,
                  "classifier-free guidance on the negative prompt, whatever the model calls it (as "
                  "stable-diffusion.cpp's): --guidance for Wan, SkyReels-V2 and LTX-Video, --true-cfg-scale for "
                  "FLUX.1 and Qwen-Image")
      ->check(finite_number());
  cmd->add_option("--guidance-2", args->request.guidance_2,
                  "Wan 2.2 A14B (a pipeline folder with transformer_2/): guidance_scale_2, the low-noise expert's "
                  "classifier-free guidance (default: --guidance's)")
      ->check(finite_number());
  cmd->add_option("-p,--prompt", args->request.prompt,
                  "the prompt, through the pipeline folder's (or preset's) tokenizers and text encoders");
  cmd->add_option("-n,--negative-prompt", args->request.negative_prompt,
                  "the negative prompt of classifier-free guidance: Wan and LTX-Video (default \"\", as their pipelines); FLUX.1 "
                  "(none by default; used with --true-cfg-scale > 1)");
  cmd->add_option("--true-cfg-scale", args->request.true_cfg_scale,
                  "true classifier-free guidance on the negative prompt (runs when there are negative embeddings "
                  "and the scale is > 1): Qwen-Image (default 4.0, rescaled to the conditional norm), FLUX.1 "
                  "(default 1.0: off)")
      ->check(finite_number());
  cmd->add_option("--embeddings", args->embeddings,
                  "safetensors with prompt_embeds (B, L, D) [FLUX.1: and pooled_prompt_embeds (B, P), negative_prompt_embeds "
                  "and negative_pooled_prompt_embeds for true CFG; Wan: and negative_prompt_embeds for guidance; "
                  "Qwen-Image: and prompt_embeds_mask (B, L), negative_prompt_embeds [and its _mask] for true CFG; LTX-Video: and "
                  "prompt_attention_mask (B, L), negative_prompt_embeds [and negative_prompt_attention_mask] for guidance]");
  cmd->add_flag("--random-embeddings", args->request.random_embeddings,
                "run a model without --prompt or --embeddings on deterministic random text embeddings, seeded by "
                "--seed (a test of the engine: the picture means nothing; presets do it unasked)");
  cmd->add_option("--latents", args->latents,
                  "safetensors whose `latents` is the initial noise in the pipeline's layout (FLUX.1 and LTX-Video: packed "
                  "(B, tokens, in_channels); Wan: (B, C, F', h, w)), as diffusers' latents= argument; may be the --embeddings file");
  cmd->add_option("--ar-step", args->request.ar_step,
                  "SkyReels-V2: each block of latent frames starts this many steps after the one before (default 0: "
                  "all frames in step)")
      ->check(whole_number<int64_t>(0));
  cmd->add_option("--first-image", args->request.first_image,
                  "image-to-video (Wan 2.1 / 2.2 and SkyReels-V2 I2V, Wan FLF2V, SkyReels-V2 diffusion forcing) from "
                  "this picture (PNG, JPEG or WebP), the clip's first frame (resized to --height x --width as the "
                  "pipeline does, encoded by the pipeline's Wan VAE, and by its image_encoder/ for models with "
                  "image_dim)");
  cmd->add_option("--init-image", args->request.init_image,
                  "FLUX.1 and Qwen-Image image-to-image (FluxImg2ImgPipeline, QwenImageImg2ImgPipeline) from this "
                  "picture (PNG, JPEG or WebP), resized to --height x --width (default: its own size, down to whole "
                  "packed latents: a multiple of 16 for their VAEs) and encoded by the pipeline's VAE");
  cmd->add_option("--strength", args->request.strength,
                  "with --init-image: the share of the schedule run from the noised image, in [0, 1] (default 0.6; "
                  "1 starts from noise alone)")
      ->check(finite_number());
  cmd->add_option("--last-image", args->request.last_image,
                  "with --first-image: the picture (PNG, JPEG or WebP) the clip ends at (Wan 2.1 FLF2V, SkyReels-V2 "
                  "diffusion forcing)");
  cmd->add_option("--fps", args->request.fps,
                  "the clip's frame rate: --video plays at it (default: SkyReels-V2 24, LTX-Video 25, Wan 16), SkyReels-V2 "
                  "models with an fps embedding are told it (16 or other), LTX-Video scales its RoPE time by it")
      ->check(whole_number<int64_t>());
  cmd->add_option("--base-num-frames", args->request.base_num_frames,
                  "SkyReels-V2: the most frames denoised together (default 97); a longer clip is made in chunks that "
                  "overlap by --overlap-history frames")
      ->check(whole_number<int64_t>(1));
  cmd->add_option("--overlap-history", args->request.overlap_history,
                  "SkyReels-V2 long video: frames each chunk takes from the end of the one before (e.g. 17 or 37)")
      ->check(whole_number<int64_t>(1));
  cmd->add_option("--addnoise-condition", args->request.addnoise_condition,
                  "SkyReels-V2 long video: noise added to the frames a chunk takes over, as a timestep (0 to 999; "
                  "default 0: none; 20 recommended)")
      ->check(finite_number());
  cmd->add_option("--text-tokens", args->request.text_tokens,
                  "text length: the max_sequence_length of --prompt (FLUX.1-dev, Wan and Qwen-Image: 512, schnell: 256, "
                  "LTX-Video: 128; Qwen-Image at most 1024), "
                  "or of --random-embeddings")
      ->check(whole_number<int64_t>());
  cmd->add_option("--decode-timestep", args->request.decode_timestep,
                  "LTX-Video's timestep-conditioned VAE: the decode timestep (default 0, as LTXPipeline; 0.05 for "
                  "LTX-Video 0.9.1+)")
      ->check(finite_number());
  cmd->add_option("--decode-noise-scale", args->request.decode_noise_scale,
                  "LTX-Video's timestep-conditioned VAE: the weight of the noise mixed into the latents before decoding "
                  "(default: the decode timestep; 0.025 for LTX-Video 0.9.1+)")
      ->check(finite_number());
  add_vae_split_option(cmd, args->request.vae_split);
  cmd->add_option("-o,--out,--output", args->outputs.out,
                  "the output, its format by its name (default: output.png, output.mp4, or output.safetensors for a model "
                  "without a VAE, in the current folder; a name taken gets _1, _2, ...): NAME.png, NAME.jpg or "
                  "NAME.webp the decoded image (JPEG and WebP at quality 90; several: NAME_0.png, ...), NAME.mp4 "
                  "the decoded clip, FOLDER/ the clip's frames as PNGs, NAME.safetensors the final latents (and, "
                  "with a VAE, the decoded `image` (B, H, W, 3) or `video` (B, F, H, W, 3), f32 in [0, 1])")
      ->check(output_name());
  cmd->add_option("--image", args->outputs.image,
                  "FLUX.1, Qwen-Image: write the decoded image here, as JPEG for a .jpg or .jpeg name, WebP for "
                  ".webp (both quality 90), else PNG (several: FILE_0.png, FILE_1.png, ...)")
      ->check(output_name());
  cmd->add_option("--frames-dir", args->outputs.frames_dir, "video: write the decoded frames into this folder as frame_00000.png, ...")
      ->check(output_name());
  cmd->add_option("--video", args->outputs.video, "video: write the decoded clip here as H.264 MP4 at --fps frames per second")
      ->check(output_name());
  cmd->add_option("--preview", args->outputs.preview, "FLUX.1: write a PNG preview of the latents here (linear latent-to-RGB projection)")
      ->check(output_name());
  cmd->add_option("--prompts", args->prompts,
                  "a batch on one opened pipeline: a .txt file of one prompt a line, or a .jsonl file of one JSON "
                  "object a line (prompt, negative_prompt, seed, steps, width, height, frames, guidance, "
                  "true_cfg_scale, cfg_scale, scheduler); request i writes each output as NAME_i (or NAME with {index} replaced)");
  cmd->add_flag("--keep-loaded", args->keep_loaded,
                "keep every model (text encoders, transformer, VAE) loaded from the start to the end (default for "
                "--prompts when they fit in half of the free memory)");
  cmd->add_flag("--staged", args->staged,
                "load each stage's models when it starts and free them when it ends, every request (default for "
                "one request: the peak is the largest stage)");
  cmd->add_flag("--json", args->json, "print the closing summary as one JSON object and no progress");
  cmd->add_flag("-v,--verbose", args->verbose,
                "add the engine's detail to the summary: ranks and their split, each stage's time and memory, "
                "the resident weights, activation peaks");
  cmd->add_option("--cache", args->cache,
                  "a step cache (diffusers' hooks; FLUX.1 and Wan, each guidance pass apart, every rank deciding "
                  "alike): fbcache[:THRESHOLD] skips the blocks after the first while its residual changes by at "
                  "most THRESHOLD (default 0.05; 0.08 is ParaAttention's for FLUX.1-dev); "
                  "magcache[:THRESHOLD][,max_skip_steps=3][,retention_ratio=0.2][,ratios=a/b/c] by accumulated "
                  "magnitude ratios (default 0.06; FLUX.1's released ratios unless given), magcache:calibrate "
                  "prints a model's ratios; taylorseer[:interval=5][,before=3][,after=N][,order=1]"
                  "[,factors=bf16|f32][,module=REGEX...] predicts the attentions' outputs (or the modules whose "
                  "diffusers paths match) between every interval-th step; the summary counts the transformer "
                  "calls computed and skipped");
  cmd->add_option("--text-kv-cache", args->text_kv_cache,
                  "project cross-attention keys and values once per run and reuse them at every step where the "
                  "tokens they come from are bitwise the same (Wan, SkyReels-V2, LTX-Video: exact; off to "
                  "keep their memory)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  add_lora_flags(*cmd, args->loras, true);
  cmd->add_flag("--check-finite", args->request.check_finite,
                "check every module's outputs for NaN/Inf and name the first module that made them (slower; "
                "the transformer's output is always checked once per step)");
  add_dry_run_flag(*cmd, args->dry_run);
  add_parallel_flags(*cmd, args->request.parallel);
  add_cfg_flag(*cmd, args->request.parallel);
  cmd->callback([args] { run(*args); });
}

const bool registered = register_command("generate", add_generate);

}  // namespace
}  // namespace cpdit::app
