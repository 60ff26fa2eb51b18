// cpdit generate: the FLUX.1 denoising loop across ranks, on a checkpoint or a built-in preset.
// Only rank 0 prints and writes files; outputs are written atomically at the end, so a failed run
// leaves nothing behind.
#include "command.hpp"
#include "parallel_flags.hpp"
#include "progress.hpp"

#include <cpdit/comm/launch.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/core/memory.hpp>
#include <cpdit/core/threads.hpp>
#include <cpdit/io/png.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/pipeline/flux_pipeline.hpp>
#include <cpdit/pipeline/latents.hpp>
#include <cpdit/pipeline/preview.hpp>
#include <cpdit/pipeline/presets.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

namespace cpdit::app {
namespace {

namespace fs = std::filesystem;

struct GenerateArgs {
  std::string model, preset, config, scheduler_config, embeddings, out, preview, dtype = "f32";
  int steps = 0;
  int64_t height = 0, width = 0, text_tokens = 512;
  uint64_t seed = 0;
  float guidance = 3.5f;
  bool json = false;
  ParallelFlags parallel;
};

// The transformer, its scheduler, and where they came from.
struct Source {
  models::flux::FluxCheckpoint checkpoint;
  pipeline::FlowMatchEulerConfig scheduler;
  std::string name;
};

Source open_source(const GenerateArgs& args) {
  CPDIT_CHECK(args.model.empty() != args.preset.empty(), invalid_argument,
              "give exactly one of --model DIR|FILE and --preset NAME");
  if (!args.preset.empty())
    return {pipeline::flux_preset(args.preset, args.seed ^ 0x5eedull), pipeline::flux_preset_scheduler(args.preset),
            "preset " + args.preset};
  // A diffusers pipeline folder holds transformer/ and scheduler/; otherwise the path is the
  // transformer itself (a folder or a single file).
  fs::path root(args.model);
  CPDIT_CHECK(fs::exists(root), invalid_argument, "--model ", args.model, " does not exist");
  const bool pipeline_dir = fs::is_directory(root / "transformer");
  fs::path scheduler_file = args.scheduler_config.empty() ? root / "scheduler" / "scheduler_config.json"
                                                          : fs::path(args.scheduler_config);
  std::optional<std::string> config;
  if (!args.config.empty()) config = args.config;
  Source s{models::flux::read_flux_checkpoint(pipeline_dir ? (root / "transformer").string() : args.model, config),
           fs::exists(scheduler_file) ? pipeline::FlowMatchEulerConfig::from_file(scheduler_file.string())
                                      : pipeline::FlowMatchEulerConfig::flux_dev(),
           args.model};
  return s;
}

void check_output_path(const std::string& path, const char* flag) {
  if (path.empty()) return;
  fs::path parent = fs::path(path).parent_path();
  CPDIT_CHECK(parent.empty() || fs::is_directory(parent), invalid_argument, flag, " ", path, ": folder ",
              parent.string(), " does not exist");
}

nlohmann::json summary(const GenerateArgs& args, const Source& source, const RankLayout& layout,
                       const pipeline::FluxGenerateResult& result, const std::vector<int64_t>& peaks,
                       double wall_seconds) {
  double total = 0, fastest = result.step_seconds.empty() ? 0 : result.step_seconds[0];
  for (double s : result.step_seconds) {
    total += s;
    fastest = std::min(fastest, s);
  }
  const int steps = int(result.step_seconds.size());
  nlohmann::json j = {{"model", source.name},
                      {"height", args.height},
                      {"width", args.width},
                      {"steps", steps},
                      {"seed", args.seed},
                      {"dtype", args.dtype},
                      {"ranks", layout.ranks},
                      {"engine", layout.mpi ? "mpi" : "local"},
                      {"ring", layout.config.ring_degree},
                      {"ulysses", layout.config.ulysses_degree},
                      {"rotate", parallel::rotate_method_name(layout.config.rotate_method)},
                      {"threads_per_rank", layout.threads_per_rank},
                      {"wall_seconds", wall_seconds},
                      {"loop_seconds", total},
                      {"seconds_per_step", steps ? total / steps : 0.0},
                      {"fastest_step_seconds", fastest},
                      {"peak_activation_bytes_per_rank", peaks},
                      {"latents_gather_seconds", result.gather_seconds},
                      {"latents_gather_bytes", result.gather_bytes},
                      // diffusers gathers the model output at every step; keeping the latents
                      // sharded leaves one gather in all.
                      {"gathers_avoided", std::max(steps - 1, 0)},
                      {"gather_bytes_avoided", int64_t(std::max(steps - 1, 0)) * result.gather_bytes}};
  if (!args.out.empty()) j["out"] = args.out;
  if (!args.preview.empty()) j["preview"] = args.preview;
  return j;
}

void print_summary(const nlohmann::json& s) {
  auto mib = [](int64_t bytes) { return double(bytes) / (1 << 20); };
  std::printf("model        %s, %lldx%lld, %d steps, seed %llu, %s weights\n", s["model"].get<std::string>().c_str(),
              (long long)s["height"], (long long)s["width"], int(s["steps"]), (unsigned long long)s["seed"],
              s["dtype"].get<std::string>().c_str());
  std::printf("parallelism  %d %s ranks, ring %d x ulysses %d (%s), %d threads per rank\n", int(s["ranks"]),
              s["engine"].get<std::string>().c_str(), int(s["ring"]), int(s["ulysses"]),
              s["rotate"].get<std::string>().c_str(), int(s["threads_per_rank"]));
  std::printf("time         %s wall, %.3f s per step (fastest %.3f s)\n",
              format_duration(s["wall_seconds"]).c_str(), double(s["seconds_per_step"]),
              double(s["fastest_step_seconds"]));
  std::printf("memory       peak activations per rank:");
  for (int64_t peak : s["peak_activation_bytes_per_rank"]) std::printf(" %.1f MiB", mib(peak));
  std::printf("\nlatents      gathered once at the end (%.2f MiB, %.4f s), %d per-step gathers avoided\n",
              mib(s["latents_gather_bytes"]), double(s["latents_gather_seconds"]), int(s["gathers_avoided"]));
  if (s.contains("out")) std::printf("wrote        %s\n", s["out"].get<std::string>().c_str());
  if (s.contains("preview")) std::printf("wrote        %s\n", s["preview"].get<std::string>().c_str());
}

void run(GenerateArgs args) {
  auto start = std::chrono::steady_clock::now();
  check_output_path(args.out, "--out");
  check_output_path(args.preview, "--preview");
  CPDIT_CHECK(args.dtype == "f32" || args.dtype == "bf16", invalid_argument, "--dtype must be f32 or bf16");
  const bool preset = !args.preset.empty();
  if (args.steps == 0) args.steps = preset ? 4 : 28;
  if (args.height == 0) args.height = preset ? 256 : 1024;
  if (args.width == 0) args.width = preset ? 256 : 1024;
  pipeline::flux_latent_shape(args.height, args.width);  // refuses sizes that are not multiples of 16

  const Source source = open_source(args);
  const models::flux::FluxConfig& config = source.checkpoint.config;
  const pipeline::FluxConditioning conditioning =
      args.embeddings.empty() ? pipeline::random_flux_conditioning(config, 1, args.text_tokens, args.seed)
                              : pipeline::read_flux_conditioning(args.embeddings, config);
  const RankLayout layout = resolve_layout(args.parallel, config.num_attention_heads, hardware_threads());
  nn::LoadOptions load;
  load.matrix_dtype = args.dtype == "bf16" ? DType::bf16 : DType::f32;

  comm::LocalOptions local;
  local.threads_per_rank = layout.threads_per_rank;
  comm::run_ranks(
      layout.ranks,
      [&](comm::Communicator& world) {
        CPDIT_CHECK(world.size() == layout.ranks, internal, "expected ", layout.ranks, " ranks, got ", world.size());
        const bool lead = world.rank() == 0;
        std::shared_ptr<comm::Communicator> group = world.split(0, world.rank());
        auto model = models::flux::load_flux(source.checkpoint, load);
        if (!args.parallel.backend.empty()) model->set_attention_backend(args.parallel.backend);
        if (group->size() > 1) model->enable_parallelism(group, layout.config, pipeline::flux_sharded_latents_plan());

        pipeline::FlowMatchEulerScheduler scheduler(source.scheduler);
        pipeline::FluxGenerateOptions options;
        options.steps = args.steps;
        options.height = args.height;
        options.width = args.width;
        options.seed = args.seed;
        options.guidance = args.guidance;
        Progress progress("generate", args.json || !lead);
        options.on_step = [&](int i, int n, double s) { progress.step(i, n, s); };

        memory::reset_peak();
        pipeline::FluxGenerateResult result = pipeline::generate_flux(*model, scheduler, conditioning, options, group.get());
        std::vector<int64_t> peaks(size_t(world.size()));
        int64_t mine = memory::peak_bytes();
        world.all_gather(&mine, sizeof mine, peaks.data());
        if (!lead) return;

        if (!args.out.empty())
          io::save_safetensors(args.out, {{"latents", result.latents}},
                               {{"format", "flux latents (B, 16, H/8, W/8), before the VAE's scaling/shift"},
                                {"seed", std::to_string(args.seed)},
                                {"steps", std::to_string(args.steps)}});
        if (!args.preview.empty())
          io::write_png(args.preview, pipeline::flux_latent_preview(result.latents), args.width, args.height);
        double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        nlohmann::json s = summary(args, source, layout, result, peaks, wall);
        if (args.json) {
          std::printf("%s\n", s.dump().c_str());
        } else {
          print_summary(s);
        }
        std::fflush(stdout);
      },
      local);
}

void add_generate(CLI::App& parent) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "generate",
      "Generate FLUX.1 latents: seeded noise, the flow-match Euler schedule and the transformer, with the image "
      "tokens split across ranks (ring, Ulysses or both) for the whole loop and gathered once at the end.\n"
      "Runs on local ranks (threads of this process) or, when launched by mpirun, on the MPI processes. "
      "Text comes from --embeddings (prompt_embeds and pooled_prompt_embeds, as a FLUX.1 text-encoder stage "
      "writes them) or, without it, deterministic random embeddings.\n"
      "Examples:\n"
      "  cpdit generate --preset flux-mini --steps 4 --out latents.safetensors --preview preview.png\n"
      "  cpdit generate --model FLUX.1-dev/ --embeddings prompt.safetensors --ring 2 --ulysses 2 --out a.safetensors\n"
      "  mpirun -np 4 cpdit generate --preset flux-tiny --ring 2 --ulysses 2 --out a.safetensors");
  CLI::Option_group* source = cmd->add_option_group("Model");
  source->add_option("--model", args->model,
                     "a diffusers FLUX.1 folder (transformer/, scheduler/), a transformer folder, or an original "
                     "single-file checkpoint");
  source->add_option("--preset", args->preset, "a built-in model with seeded random weights: flux-tiny or flux-mini");
  source->require_option(1);
  cmd->add_option("--config", args->config, "transformer config.json overriding the checkpoint's or the inferred one");
  cmd->add_option("--scheduler-config", args->scheduler_config,
                  "scheduler_config.json (default: DIR/scheduler/, else FLUX.1-dev's)");
  cmd->add_option("--dtype", args->dtype, "weights of the linear layers: f32 or bf16 (bf16 GEMM, f32 accumulation)");
  cmd->add_option("--steps", args->steps, "denoising steps (default: 4 for presets, 28 otherwise)")->check(CLI::PositiveNumber);
  cmd->add_option("--height", args->height, "image height in pixels, a multiple of 16 (default: 256 for presets, 1024 otherwise)");
  cmd->add_option("--width", args->width, "image width in pixels, a multiple of 16 (default: 256 for presets, 1024 otherwise)");
  cmd->add_option("--seed", args->seed, "seed of the initial noise (and of the random embeddings)");
  cmd->add_option("--guidance", args->guidance, "guidance scale, for models with a guidance embedder (FLUX.1-dev)");
  cmd->add_option("--embeddings", args->embeddings, "safetensors with prompt_embeds (B, L, 4096) and pooled_prompt_embeds (B, 768)");
  cmd->add_option("--text-tokens", args->text_tokens, "length of the random text embeddings when --embeddings is not given")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--out", args->out, "write the final latents (B, 16, H/8, W/8) here (safetensors, atomically)");
  cmd->add_option("--preview", args->preview, "write a PNG preview of the latents here (linear latent-to-RGB projection)");
  cmd->add_flag("--json", args->json, "print the closing summary as one JSON object and no progress");
  add_parallel_flags(*cmd, args->parallel);
  cmd->callback([args] { run(*args); });
}

const bool registered = register_command("generate", add_generate);

}  // namespace
}  // namespace cpdit::app
