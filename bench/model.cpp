// `cpdit bench model --model flux`: latency of one FLUX.1 double-stream and one single-stream block
// at FLUX.1 widths (3072 = 24 heads x 128, MLP 12288) with 512 text tokens, on 1 rank and on 2 ranks
// (one compute thread each, context parallel), with each rank's peak tensor memory. Random weights
// from a fixed seed; the 2-rank lines carry their speedup over the 1-rank line of the same run.
#include "command.hpp"
#include "measure.hpp"
#include "model_wan.hpp"

#include <cpdit/comm/local.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/models/flux/blocks.hpp>
#include <cpdit/nn/load.hpp>
#include <cpdit/parallel/context.hpp>
#include <cpdit/parallel/shard.hpp>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <memory>
#include <mutex>
#include <optional>

namespace cpdit::bench {
namespace {

using models::flux::DoubleBlock;
using models::flux::PosEmbed;
using models::flux::SingleBlock;

constexpr int64_t kDim = 3072, kHeads = 24, kHeadDim = 128, kText = 512;

struct ModelBenchArgs {
  std::string model = "flux";
  bool quick = false;
  std::string dtype = "f32";
  std::vector<int64_t> image_tokens;  // default: 1024 (quick) or 1024 and 4096
  int repeats = 0;                    // default: 1 (quick) or 3
};

// Uniform values with variance 1/fan_in (the scale of a trained Linear), from a seeded xorshift.
Tensor random_tensor(const Shape& shape, double scale, uint64_t& state) {
  Tensor t = Tensor::empty(shape);
  float* p = t.data<float>();
  const double a = scale * std::sqrt(3.0);
  for (int64_t i = 0; i < t.numel(); ++i) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    p[i] = float(a * (double(state >> 11) / double(1ull << 53) * 2.0 - 1.0));
  }
  return t;
}

// Random weights for `m`, converted once to the benchmark's dtype; replicas loaded from the
// result share them.
nn::StateDict random_weights(nn::Module& m, uint64_t seed, const nn::LoadOptions& load) {
  nn::StateDict state;
  for (auto& [name, p] : m.named_parameters()) {
    bool norm = p->shape.size() == 1 && name.find("norm_") != std::string::npos;
    state[name] = norm ? Tensor::full(p->shape, 1.0) : random_tensor(p->shape, 1.0 / std::sqrt(double(p->shape.back())), seed);
  }
  nn::load_state_dict(m, state, load);
  return nn::parameters_of(m);
}

struct BlockTimes {
  Timing dbl, single;
  double dbl_cpu_s = 0, single_cpu_s = 0;  // rank 0's own CPU time, fastest timed run
  std::vector<comm::RankStats> stats;
};

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// measure(), plus the calling thread's CPU time per run: on a shared, oversubscribed machine the
// wall clock also counts time spent waiting for a core; with one compute thread per rank (OpenMP
// and oneDNN run on the calling thread) the CPU time is the work itself.
Timing measure_with_cpu(const std::function<void()>& fn, int repeats, double& min_cpu_s) {
  std::vector<double> cpu;
  Timing t = measure([&] {
    double start = thread_cpu_seconds();
    fn();
    cpu.push_back(thread_cpu_seconds() - start);
  }, repeats);
  min_cpu_s = *std::min_element(cpu.begin() + 1, cpu.end());  // cpu[0] is the warm-up
  return t;
}

BlockTimes time_blocks(int ring, int ulysses, int64_t image, const nn::StateDict& dbl_weights,
                       const nn::StateDict& single_weights, const nn::LoadOptions& load, int repeats) {
  const int ranks = ring * ulysses;
  uint64_t seed = 42;
  const Tensor x = random_tensor({1, image, kDim}, 1.0, seed), c = random_tensor({1, kText, kDim}, 1.0, seed);
  const Tensor temb = random_tensor({1, kDim}, 1.0, seed);
  const int64_t side = int64_t(std::lround(std::sqrt(double(image))));
  std::vector<float> ids;
  for (int64_t i = 0; i < image; ++i) ids.insert(ids.end(), {0.0f, float(i / side), float(i % side)});
  const Tensor img_ids = Tensor::from_vector(ids, {image, 3}), txt_ids = Tensor::zeros({kText, 3});

  BlockTimes result;
  std::mutex m;
  comm::LocalOptions options;
  options.threads_per_rank = 1;
  result.stats = comm::run_local(ranks, [&](comm::Communicator& world) {
    DoubleBlock dbl(kDim, kHeads, kHeadDim);
    SingleBlock single(kDim, kHeads, kHeadDim);
    nn::load_state_dict(dbl, dbl_weights, load);
    nn::load_state_dict(single, single_weights, load);
    std::optional<parallel::ParallelContext> context;
    std::optional<attention::ScopedRouter> bind;
    Tensor xl = x, cl = c, txt = txt_ids, img = img_ids;
    if (ranks > 1) {
      parallel::ContextParallelConfig config;
      config.ring_degree = ring;
      config.ulysses_degree = ulysses;
      context.emplace(std::shared_ptr<comm::Communicator>(&world, [](comm::Communicator*) {}), config);
      bind.emplace(&*context);
      comm::Communicator& flat = context->mesh().flat();
      xl = parallel::shard(x, 1, flat);
      cl = parallel::shard(c, 1, flat);
      txt = parallel::shard(txt_ids, 0, flat);
      img = parallel::shard(img_ids, 0, flat);
    }
    auto rope = PosEmbed({16, 56, 56}).forward(cat({txt, img}, 0));
    double dbl_cpu = 0, single_cpu = 0;
    Timing td = measure_with_cpu([&] { dbl.forward(xl, cl, temb, rope[0], rope[1]); }, repeats, dbl_cpu);
    Timing ts = measure_with_cpu([&] { single.forward(xl, cl, temb, rope[0], rope[1]); }, repeats, single_cpu);
    std::lock_guard lock(m);
    if (world.rank() == 0) {
      result.dbl = td;
      result.single = ts;
      result.dbl_cpu_s = dbl_cpu;
      result.single_cpu_s = single_cpu;
    }
  }, options);
  return result;
}

// 2 x (12 D^2 per token in the projections) + 4 S^2 D in attention; the same for both block kinds.
double block_gflop(int64_t tokens) { return (24.0 * kDim * kDim * tokens + 4.0 * tokens * tokens * kDim) / 1e9; }

void run_model_bench(const ModelBenchArgs& args) {
  if (args.model == "wan")
    return run_wan_model_bench({args.quick, args.dtype, args.image_tokens, args.repeats > 0 ? args.repeats : (args.quick ? 1 : 3)});
  CPDIT_CHECK(args.model == "flux", invalid_argument, "bench model: --model must be flux or wan");
  const nn::LoadOptions load = nn::load_options(args.dtype);  // the random weights are f32: auto is f32
  const int repeats = args.repeats > 0 ? args.repeats : (args.quick ? 1 : 3);
  std::vector<int64_t> images = args.image_tokens;
  if (images.empty()) images = args.quick ? std::vector<int64_t>{1024} : std::vector<int64_t>{1024, 4096};

  DoubleBlock dbl(kDim, kHeads, kHeadDim);
  SingleBlock single(kDim, kHeads, kHeadDim);
  const nn::StateDict dbl_weights = random_weights(dbl, 1, load), single_weights = random_weights(single, 2, load);
  int64_t weight_bytes = 0;
  for (const auto* s : {&dbl_weights, &single_weights})
    for (const auto& [name, t] : *s) weight_bytes += int64_t(t.nbytes());

  struct Layout {
    int ring, ulysses;
    const char* name;
  };
  std::vector<Layout> layouts{{1, 1, "single_rank"}, {1, 2, "ulysses"}};
  if (!args.quick) layouts.push_back({2, 1, "ring"});
  for (int64_t image : images) {
    double base_double = 0, base_single = 0;
    for (const Layout& l : layouts) {
      BlockTimes t = time_blocks(l.ring, l.ulysses, image, dbl_weights, single_weights, load, repeats);
      std::vector<int64_t> peaks;
      for (const auto& s : t.stats) peaks.push_back(s.peak_bytes);
      for (const char* kind : {"double", "single"}) {
        const bool is_double = std::string(kind) == "double";
        const Timing& timing = is_double ? t.dbl : t.single;
        const double cpu_s = is_double ? t.dbl_cpu_s : t.single_cpu_s;
        double& base = is_double ? base_double : base_single;
        if (l.ring * l.ulysses == 1) base = timing.min_s;
        auto j = line("model");
        j["model"] = "flux";
        j["block"] = kind;
        j["image_tokens"] = image;
        j["text_tokens"] = kText;
        j["ranks"] = l.ring * l.ulysses;
        j["layout"] = l.name;
        j["ring"] = l.ring;
        j["ulysses"] = l.ulysses;
        j["threads_per_rank"] = 1;
        j["dtype"] = args.dtype;
        j["min_s"] = timing.min_s;
        j["median_s"] = timing.median_s;
        j["gflop"] = block_gflop(image + kText);
        j["gflops"] = block_gflop(image + kText) / timing.min_s;
        j["rank0_cpu_s"] = cpu_s;
        j["gflops_per_cpu_s"] = block_gflop(image + kText) / (cpu_s * l.ring * l.ulysses);
        j["speedup_vs_1_rank"] = base / timing.min_s;
        j["peak_activation_bytes_per_rank"] = peaks;
        j["shared_weight_bytes"] = weight_bytes;  // one copy for all thread ranks
        print(j);
      }
    }
  }
}

void add_model_bench(CLI::App& parent) {
  auto args = std::make_shared<ModelBenchArgs>();
  CLI::App* cmd = parent.add_subcommand("model", "per-block latency of a model at full width, 1 and 2 ranks");
  cmd->add_option("--model", args->model, "model: flux | wan (Wan 2.1 1.3B block, 1950 / 7800 video tokens)")->capture_default_str();
  cmd->add_flag("--quick", args->quick, "1024 image tokens, one timed run, no ring layout");
  cmd->add_option("--dtype", args->dtype, "GEMM weights: f32 | bf16")->capture_default_str();
  cmd->add_option("--image-tokens", args->image_tokens, "image token counts (default 1024 4096; wan: video tokens, 1950 7800)");
  cmd->add_option("--repeats", args->repeats, "timed repeats after one warm-up");
  cmd->callback([args] { run_model_bench(*args); });
}

const bool registered = app::register_bench("model", add_model_bench);

}  // namespace
}  // namespace cpdit::bench
