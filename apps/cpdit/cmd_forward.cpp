// `cpdit forward`: one model forward (the class the checkpoint names, opened through the model
// registry, models/registry.hpp) from a safetensors file of inputs, on one rank or with context
// parallelism across local thread ranks (or the processes of an mpirun launch).
#include "command.hpp"
#include <cpdit/pipeline/same_across_ranks.hpp>
#include "lora_flags.hpp"
#include "option_checks.hpp"
#include "output_paths.hpp"
#include "parallel_flags.hpp"
#include "vae_split_option.hpp"
#include "weight_flags.hpp"

#include <cpdit/comm/launch.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/models/registry.hpp>
#include <cpdit/nn/lora.hpp>
#include <cpdit/pipeline/finite_check.hpp>
#include <cpdit/pipeline/vae_decode.hpp>

#include <memory>
#include <optional>
#include <string>

namespace cpdit::app {
namespace {

struct ForwardOptions {
  std::string model, inputs, output, config, backend, rotate = "p2p", dtype = "auto";
  int ring = 1, ulysses = 1, ranks = 0, threads = 0;
  models::vae::VideoSplit vae_split = models::vae::VideoSplit::rows;  // frames: Wan's video VAE only
  LoraFlags loras;
};

void run_forward(const ForwardOptions& o) {
  pipeline::check_same_model_across_ranks({o.model, o.config});
  parallel::ContextParallelConfig config;
  config.ring_degree = o.ring;
  config.ulysses_degree = o.ulysses;
  config.rotate_method = parallel::parse_rotate_method(o.rotate);
  const bool mpi = comm::launched_by_mpi();
  const int ranks = o.ranks > 0 ? o.ranks : config.group_size();
  // Ranks without degrees (--ranks N, or an mpirun world) all go on the ring.
  auto degrees_for = [config](int world) {
    parallel::ContextParallelConfig c = config;
    if (c.group_size() == 1) c.ring_degree = world;
    return c;
  };
  if (!mpi) {
    check_local_ranks(ranks);
    parallel::validate_degrees(degrees_for(ranks), ranks);
  }
  const nn::LoadOptions load = nn::load_options(o.dtype);
  const ScopedMatmulPrecision precision(nn::matmul_precision_for(o.dtype));
  // Loaded and converted once; every rank's replica shares these weights.
  const models::LoadedModel loaded =
      models::open_model(o.model, o.config.empty() ? std::nullopt : std::optional(o.config), load);
  const bool by_frames = o.vae_split == models::vae::VideoSplit::frames;
  pipeline::check_vae_split(loaded, o.vae_split);
  // After the model is found (its class and files named in the errors first), before anything runs.
  std::vector<NamedPath> read = model_inputs("--model", o.model, "transformer",
                                             o.config.empty() ? std::nullopt : std::optional(o.config));
  read.push_back({"--inputs", o.inputs});
  std::vector<nn::LoraUse> uses;
  for (const pipeline::LoraChoice& choice : lora_choices(o.loras)) {
    read.push_back({"--lora", choice.path});
    uses.push_back({std::make_shared<const nn::LoraFile>(nn::read_lora(choice.path)), choice.weight, choice.merge});
  }
  refuse_overwrite({{"--output", o.output}}, read);
  const nn::TensorMap inputs = io::load_safetensors(o.inputs);
  // The adapters matched to the model once; each rank's replica takes them.
  const nn::LoraApplication lora =
      uses.empty() ? nn::LoraApplication{} : nn::lora_application(*loaded.replica(), uses, loaded.original_names, o.model);

  comm::LocalOptions local;
  local.threads_per_rank = o.threads;
  comm::run_ranks(ranks, [&](comm::Communicator& world) {
    auto model = loaded.replica();
    nn::apply_lora(*model, lora);
    if (!o.backend.empty()) model->set_attention_backend(o.backend);
    if (by_frames) dynamic_cast<models::vae::AutoencoderKLWan&>(*model).set_video_split(o.vae_split);
    if (world.size() > 1 || config.group_size() > 1) {
      // The communicator outlives this call; the model only borrows it.
      model->enable_parallelism(std::shared_ptr<comm::Communicator>(&world, [](comm::Communicator*) {}),
                                degrees_for(world.size()));
    }
    nn::TensorMap outputs = model->forward(inputs);
    if (world.rank() != 0) return;
    // NaN or Inf in the weights (or an overflow) is refused, not written as a result.
    for (const auto& [name, tensor] : outputs)
      CPDIT_CHECK(pipeline::all_finite(tensor), invalid_argument, "the model's output `", name,
                  "` holds NaN or Inf (are the weights and inputs finite?); nothing written");
    io::save_safetensors(o.output, outputs);
    print_weights_line(resident_weight_bytes(), o.dtype);
    print_written({{"--output", o.output}});
  }, local);
}

void add_forward(CLI::App& parent) {
  auto o = std::make_shared<ForwardOptions>();
  CLI::App* cmd =
      parent.add_subcommand("forward",
                            "Run one model forward (the class named by config.json's _class_name or architectures); "
                            "writes its outputs (`sample`; a VAE's `latent` from an input `sample`; a text encoder's "
                            "`last_hidden_state` [, `pooler_output`]) to a safetensors file.");
  cmd->add_option(
         "-m,--model", o->model,
         "model folder (config.json + weights, single or sharded), diffusers pipeline folder (its transformer/), "
         "index json, or one .safetensors file (diffusers layout, or the original FLUX.1 one; its config is "
         "--config, else a config.json beside it, else told from the tensors)")
      ->required();
  cmd->add_option("--inputs", o->inputs, "safetensors with the forward's arguments by diffusers name")->required();
  cmd->add_option("-o,--out,--output", o->output, "safetensors to write the outputs to (atomically)")->required()->check(output_name());
  cmd->add_option("--config", o->config, "config.json overriding the model's (or the inferred) config");
  cmd->add_option("--ring", o->ring, "ring degree")->capture_default_str()->check(whole_number<int>());
  cmd->add_option("--ulysses", o->ulysses, "Ulysses degree")->capture_default_str()->check(whole_number<int>());
  cmd->add_option("--rotate", o->rotate, "ring KV rotation: p2p | allgather")->capture_default_str();
  cmd->add_option("--backend", o->backend, "attention backend (default: the process default)");
  cmd->add_option("--ranks", o->ranks,
                  "local thread ranks (default ring x ulysses; alone, every rank on the ring; ignored under mpirun)")
      ->check(whole_number<int>());
  cmd->add_option("--threads", o->threads, "compute threads per rank (default: cores / ranks)")
      ->check(whole_number<int>());
  add_dtype_flag(*cmd, o->dtype);
  add_vae_split_option(cmd, o->vae_split);
  add_lora_flags(*cmd, o->loras, false);
  cmd->callback([o] { run_forward(*o); });
}

const bool registered = register_command("forward", add_forward);

}  // namespace
}  // namespace cpdit::app
