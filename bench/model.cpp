// `cpdit bench model --model flux|wan|ltx|qwenimage|skyreels`: latency of a model family's blocks
// at full width on 1 rank and on 2 ranks (one compute thread each, context parallel: Ulysses, and
// ring unless --quick), with each rank's peak tensor memory. The families (bench/model_flux.cpp,
// model_wan.cpp, model_ltx.cpp) say what to build; the one loop here times every family the same
// way. Multi-rank lines carry their speedup over the 1-rank line of the same run in wall time and
// in CPU time: on a shared, oversubscribed machine wall time includes time spent descheduled, so
// the process CPU time of the cheapest repeat, shared out over the ranks, is the steadier figure. A
// layout's time is its slowest rank's: under a causal mask the ring gives its first rank less
// attention to do (the keys of later ranks are hidden from it), so rank 0 alone would flatter the
// ring.
#include "command.hpp"
#include "measure.hpp"
#include "model_blocks.hpp"
#include "weight_flags.hpp"

#include <cpdit/comm/local.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/models/registry.hpp>
#include <cpdit/nn/lora.hpp>
#include <cpdit/parallel/context.hpp>
#include <cpdit/pipeline/presets.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>

#include <unistd.h>

namespace cpdit::bench {

namespace {

// `weights` written to a safetensors file and read back as views of its mapping. The file is removed
// at once: the mapping keeps its pages.
nn::StateDict mapped_through_a_file(const nn::StateDict& weights) {
  std::map<std::string, Tensor> values;
  for (const auto& [name, w] : weights) values.emplace(name, w.values("bench model --mapped"));
  const char* tmp = std::getenv("TMPDIR");
  const std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/cpdit-bench-weights-" +
                           std::to_string(::getpid()) + ".safetensors";
  io::save_safetensors(path, values);
  const io::SafetensorsFile file = io::SafetensorsFile::open(path);
  nn::StateDict mapped;
  for (const std::string& name : file.names()) mapped.emplace(name, file.get(name));
  std::filesystem::remove(path);
  return mapped;
}

}  // namespace

nn::StateDict shared_random_weights(nn::Module& module, uint64_t seed, const WeightSource& source) {
  nn::load_state_dict(module, pipeline::random_state_dict(module, seed), source.load);
  if (source.mapped) nn::load_state_dict(module, mapped_through_a_file(nn::parameters_of(module)), source.load);
  return nn::parameters_of(module);
}

void add_random_lora(nn::Module& module, const WeightSource& source) {
  if (source.lora_rank <= 0) return;
  uint64_t seed = 1000;
  nn::LoraApplication lora;
  for (const auto& [path, m] : module.named_modules())
    if (auto* linear = dynamic_cast<nn::Linear*>(m)) {
      const int64_t rank = source.lora_rank;
      lora.deltas[path] = {random_tensor({rank, linear->in_features()}, seed),
                           random_tensor({linear->out_features(), rank}, seed + 1)};
      seed += 2;
    }
  if (source.lora_merge) lora = {{}, nn::merged_weights(module, lora.deltas, "bench model")};
  nn::apply_lora(module, lora);
}

int64_t bytes_of(const nn::StateDict& weights) {
  int64_t bytes = 0;
  for (const auto& [name, t] : weights) bytes += int64_t(t.nbytes());
  return bytes;
}

namespace {

struct ModelBenchArgs {
  std::string model = "flux";
  bool quick = false;
  std::string dtype = "f32";
  std::vector<int64_t> tokens;  // default: the family's
  int repeats = 0;              // default: 1 (quick) or 3
  std::string token_layout;     // default: the family's
  bool mapped = false;          // the weights read from a mapped safetensors file, as a checkpoint's are
  int64_t lora_rank = 0;        // > 0: each block without and with a LoRA delta of this rank on every Linear
};

parallel::TokenLayout token_layout_named(const std::string& name) {
  for (parallel::TokenLayout layout : {parallel::TokenLayout::contiguous, parallel::TokenLayout::zigzag})
    if (name == parallel::token_layout_name(layout)) return layout;
  fail(ErrorKind::invalid_argument, "bench model: unknown --token-layout '", name, "'; use contiguous or zigzag");
}

// The block benchmark of a registered model class, by the class name or its family's short name.
BlockBench block_bench(const std::string& model, const WeightSource& source) {
  const std::string class_name = model == "flux"        ? "FluxTransformer2DModel"
                                 : model == "wan"       ? "WanTransformer3DModel"
                                 : model == "ltx"       ? "LTXVideoTransformer3DModel"
                                 : model == "qwenimage" ? "QwenImageTransformer2DModel"
                                 : model == "skyreels"  ? "SkyReelsV2Transformer3DModel"
                                                        : model;
  models::model_entry(class_name);  // a class nobody registered is refused with the known ones
  if (class_name == "FluxTransformer2DModel") return flux_blocks(source);
  if (class_name == "WanTransformer3DModel") return wan_blocks(source);
  if (class_name == "LTXVideoTransformer3DModel") return ltx_blocks(source);
  if (class_name == "QwenImageTransformer2DModel") return qwenimage_blocks(source);
  if (class_name == "SkyReelsV2Transformer3DModel") return skyreels_blocks(source);
  fail(ErrorKind::unsupported, "bench model has no blocks for ", class_name,
       " (it times flux, wan, ltx, qwenimage and skyreels)");
}

struct LayoutRun {
  std::vector<std::string> blocks;
  std::vector<Timing> slowest;  // per block, the timing of the rank whose cheapest repeat took longest
  std::vector<comm::RankStats> stats;
};

// Each block of `bench` timed on ring x ulysses local ranks, one compute thread each, with the
// parallel context bound; the slowest rank's timings.
LayoutRun time_layout(const BlockBench& bench, int ring, int ulysses, int64_t tokens, int repeats) {
  LayoutRun run;
  std::mutex mutex;
  comm::LocalOptions one_thread_each;
  one_thread_each.threads_per_rank = 1;
  run.stats = comm::run_local(ring * ulysses, [&](comm::Communicator& world) {
    std::optional<parallel::ParallelContext> context;
    std::optional<attention::ScopedRouter> bind;
    parallel::ParallelContext* split = nullptr;
    if (ring * ulysses > 1) {
      parallel::ContextParallelConfig config;
      config.ring_degree = ring;
      config.ulysses_degree = ulysses;
      config.token_layout = bench.layout;
      context.emplace(std::shared_ptr<comm::Communicator>(&world, [](comm::Communicator*) {}), config);
      bind.emplace(&*context);
      split = &*context;
    }
    std::vector<std::string> names;
    std::vector<Timing> timings;
    for (const TimedBlock& block : bench.blocks(tokens, split)) {
      names.push_back(block.block);
      timings.push_back(measure(block.forward, repeats));
    }
    std::lock_guard lock(mutex);
    run.blocks = names;
    if (run.slowest.empty()) run.slowest.resize(timings.size());
    for (size_t b = 0; b < timings.size(); ++b)
      if (timings[b].min_s > run.slowest[b].min_s) run.slowest[b] = timings[b];
  }, one_thread_each);
  return run;
}

// Each block's output in `dtype` against the f32 blocks on the same seeded weights and inputs (one
// rank): max |out - f32| / max |f32| and mean |out - f32| / mean |f32|.
void print_accuracy(const BlockBench& bench, const std::string& dtype, const nn::LoadOptions& load, int64_t tokens,
                    const std::vector<std::string>& names) {
  if (dtype == "f32" || !bench.block_outputs) return;
  std::vector<Tensor> reference;
  {
    const ScopedMatmulPrecision exact(MatmulPrecision::exact_f32);
    reference = bench.block_outputs(tokens, nn::load_options("f32"));
  }
  const std::vector<Tensor> got = bench.block_outputs(tokens, load);
  for (size_t b = 0; b < got.size() && b < names.size(); ++b) {
    double max_diff = 0, max_ref = 0, sum_diff = 0, sum_ref = 0;
    const float *g = got[b].contiguous().data<float>(), *r = reference[b].contiguous().data<float>();
    for (int64_t i = 0; i < got[b].numel(); ++i) {
      const double diff = std::abs(double(g[i]) - double(r[i]));
      max_diff = std::max(max_diff, diff), max_ref = std::max(max_ref, std::abs(double(r[i])));
      sum_diff += diff, sum_ref += std::abs(double(r[i]));
    }
    auto j = line("model_accuracy");
    j.update({{"model", bench.class_name}, {"block", names[b]}, {bench.tokens_field, tokens}, {"dtype", dtype},
              {"max_relative_error", max_diff / max_ref}, {"mean_relative_error", sum_diff / sum_ref}});
    print(j);
  }
}

// Each block on one rank without a LoRA, with a random LoRA delta on every Linear beside the weights
// (generate --lora) and with it merged into them (--lora-merge), in the same run: the adapter's cost
// in CPU time.
void run_lora_overhead(const ModelBenchArgs& args, const nn::LoadOptions& load) {
  const BlockBench plain = block_bench(args.model, {load, args.mapped});
  const BlockBench adapted = block_bench(args.model, {load, args.mapped, args.lora_rank});
  const BlockBench merged = block_bench(args.model, {load, args.mapped, args.lora_rank, true});
  const int repeats = args.repeats > 0 ? args.repeats : (args.quick ? 1 : 3);
  for (int64_t tokens : !args.tokens.empty() ? args.tokens : args.quick ? plain.quick_tokens : plain.default_tokens) {
    const LayoutRun without = time_layout(plain, 1, 1, tokens, repeats);
    const LayoutRun with = time_layout(adapted, 1, 1, tokens, repeats);
    const LayoutRun into = time_layout(merged, 1, 1, tokens, repeats);
    for (size_t b = 0; b < with.blocks.size(); ++b) {
      const Timing &t0 = without.slowest[b], &t1 = with.slowest[b], &t2 = into.slowest[b];
      auto j = line("model_lora");
      j.update({{"model", plain.class_name}, {"block", with.blocks[b]}, {plain.tokens_field, tokens},
                {"dtype", args.dtype}, {"lora_rank", args.lora_rank}, {"min_s", t0.min_s}, {"lora_min_s", t1.min_s},
                {"median_s", t0.median_s}, {"lora_median_s", t1.median_s}, {"cpu_s", t0.cpu_min_s},
                {"lora_cpu_s", t1.cpu_min_s}, {"lora_cpu_overhead", t1.cpu_min_s / t0.cpu_min_s - 1},
                {"merged_min_s", t2.min_s}, {"merged_cpu_s", t2.cpu_min_s},
                {"merged_cpu_overhead", t2.cpu_min_s / t0.cpu_min_s - 1}});
      print(j);
    }
  }
}

void run_model_bench(const ModelBenchArgs& args) {
  const nn::LoadOptions load = nn::load_options(args.dtype);  // the random weights are f32: auto is f32
  CPDIT_CHECK(!args.mapped || args.dtype == "f32" || args.dtype == "bf16", invalid_argument,
              "bench model: --mapped maps dense weights (--dtype f32 or bf16), not ", args.dtype);
  const ScopedMatmulPrecision precision(nn::matmul_precision_for(args.dtype));
  CPDIT_CHECK(args.lora_rank >= 0, invalid_argument, "bench model: --lora-rank must be positive, got ", args.lora_rank);
  if (args.lora_rank > 0) return run_lora_overhead(args, load);
  BlockBench bench = block_bench(args.model, {load, args.mapped});
  if (!args.token_layout.empty()) bench.layout = token_layout_named(args.token_layout);
  const int repeats = args.repeats > 0 ? args.repeats : (args.quick ? 1 : 3);
  const std::vector<int64_t> token_counts =
      !args.tokens.empty() ? args.tokens : args.quick ? bench.quick_tokens : bench.default_tokens;

  struct Layout {
    int ring, ulysses;
    const char* name;
  };
  std::vector<Layout> layouts{{1, 1, "single_rank"}, {1, 2, "ulysses"}};
  if (!args.quick) layouts.push_back({2, 1, "ring"});
  for (int64_t tokens : token_counts) {
    const double gflop = bench.block_gflop(tokens);
    LayoutRun base;  // the 1-rank run, first in `layouts`
    for (const Layout& l : layouts) {
      const int ranks = l.ring * l.ulysses;
      LayoutRun run = time_layout(bench, l.ring, l.ulysses, tokens, repeats);
      if (ranks == 1) base = run;
      std::vector<int64_t> peaks;
      for (const auto& s : run.stats) peaks.push_back(s.peak_bytes);
      for (size_t b = 0; b < run.blocks.size(); ++b) {
        const Timing& t = run.slowest[b];
        auto j = line("model");
        j.update({{"model", bench.class_name}, {"block", run.blocks[b]}, {bench.tokens_field, tokens},
                  {"text_tokens", bench.text_tokens}, {"ranks", ranks}, {"layout", l.name}, {"ring", l.ring},
                  {"ulysses", l.ulysses}, {"token_layout", parallel::token_layout_name(bench.layout)},
                  {"threads_per_rank", 1}, {"dtype", args.dtype}, {"mapped_weights", args.mapped},
                  {"min_s", t.min_s}, {"median_s", t.median_s},
                  {"gflop", gflop}, {"gflops", gflop / t.min_s}, {"cpu_s_per_rank", t.cpu_min_s / ranks},
                  {"cpu_median_s_per_rank", t.cpu_median_s / ranks}, {"gflops_per_cpu_s", gflop / t.cpu_min_s},
                  {"speedup_vs_1_rank", base.slowest[b].min_s / t.min_s},
                  {"cpu_speedup_vs_1_rank", base.slowest[b].cpu_min_s / (t.cpu_min_s / ranks)},
                  {"peak_activation_bytes_per_rank", peaks},
                  {"shared_weight_bytes", bench.weight_bytes}});  // one copy for all thread ranks
        print(j);
      }
    }
    if (tokens == token_counts.front()) print_accuracy(bench, args.dtype, load, tokens, base.blocks);
  }
}

void add_model_bench(CLI::App& parent) {
  auto args = std::make_shared<ModelBenchArgs>();
  CLI::App* cmd = parent.add_subcommand("model", "per-block latency of a model at full width, 1 and 2 ranks");
  cmd->add_option("--model", args->model,
                  "flux | wan (Wan 2.1 1.3B block, 1950 / 7800 video tokens) | ltx (LTX-Video 2B block, 1536 / "
                  "384 video tokens) | qwenimage (one dual-stream block, 4096 image + 256 text tokens) | skyreels "
                  "(the Wan block with block-causal and full attention, 2550 / 10200 video tokens), or the "
                  "registered class name")
      ->capture_default_str();
  cmd->add_flag("--quick", args->quick, "the smaller token count, one timed run, no ring layout");
  cmd->add_option("--dtype", args->dtype,
                  "weights and arithmetic as --dtype of generate: f32, bf16 (bf16 Linear layers, f32 accumulation), "
                  "q8_0 or q4_k (Linear weights encoded in that GGUF block format); for all but f32 also each "
                  "block's error against the f32 block (FLUX.1)")
      ->capture_default_str();
  cmd->add_option("--image-tokens", args->tokens,
                  "token counts (default flux: 1024 4096 image tokens; wan: 1950 7800 video tokens; ltx: 1536; "
                  "skyreels: 2550 10200)");
  cmd->add_option("--repeats", args->repeats, "timed repeats after one warm-up");
  cmd->add_option("--token-layout", args->token_layout,
                  "how the ranks split the tokens: contiguous or zigzag (default: the model's; skyreels: zigzag, "
                  "which balances the ring under its block-causal mask)");
  cmd->add_flag("--mapped", args->mapped,
                "the weights written in --dtype to a temporary safetensors file and mapped back (views of the file, "
                "as a downloaded checkpoint is read; its tensors start 8-byte aligned, not on cache lines)");
  cmd->add_option("--lora-rank", args->lora_rank,
                  "time each block on one rank without a LoRA, with a random LoRA of this rank on every Linear "
                  "beside the weights, and merged into them (flux, wan): the adapter's overhead in CPU time");
  cmd->callback([args] { run_model_bench(*args); });
}

const bool registered = app::register_bench("model", add_model_bench);

}  // namespace
}  // namespace cpdit::bench
