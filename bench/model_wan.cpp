// One Wan 2.1 T2V-1.3B transformer block at full width, as `cpdit bench model --model wan` runs it:
// a 480x832 17-frame clip is latent 16 x 5 x 60 x 104 = 5 x 30 x 52 = 7800 tokens; the quarter-size
// clip 5 x 15 x 26 = 1950 tokens. Random weights from a fixed seed. Ranks split the video tokens as
// the Wan plan does (RoPE tables and hidden states on the token dim); the 512 text tokens stay whole
// on every rank (cross-attention to replicated keys).
#include "model_wan.hpp"

#include "measure.hpp"

#include <cpdit/comm/local.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/wan/blocks.hpp>
#include <cpdit/parallel/context.hpp>
#include <cpdit/parallel/shard.hpp>
#include <cpdit/pipeline/random.hpp>

#include <cmath>
#include <mutex>
#include <optional>

namespace cpdit::bench {
namespace {

using models::wan::Block;

constexpr int64_t kDim = 1536, kHeads = 12, kHeadDim = 128, kFfn = 8960, kText = 512, kChannels = 16;
constexpr std::array<int64_t, 3> kPatch{1, 2, 2};

// Latent (frames, rows, columns) of patches for the clip sizes named above: 5 frames, 30 x 52 at
// 480x832 and half of each side for the quarter-size clip.
std::array<int64_t, 3> grid_for(int64_t tokens) {
  for (int64_t rows : {30, 15})
    if (tokens == 5 * rows * (rows * 52 / 30)) return {5, rows, rows * 52 / 30};
  fail(ErrorKind::invalid_argument, "bench model --model wan: --tokens must be 7800 (5 x 30 x 52) or 1950 (5 x 15 x 26), got ",
       tokens);
}

Tensor scaled_randn(const Shape& shape, double scale, uint64_t seed) {
  return kernels::mul(pipeline::randn(shape, seed), Tensor::full({1}, scale));
}

// Linear weights ~ N(0, 1/fan_in), biases and the modulation table small, norm weights 1.
nn::StateDict random_block_weights(Block& block, const nn::LoadOptions& load) {
  nn::StateDict state;
  uint64_t seed = 1;
  for (auto& [name, p] : block.named_parameters()) {
    const bool norm = name.find("norm") != std::string::npos && name.ends_with(".weight");
    state[name] = norm ? Tensor::full(p->shape, 1.0)
                       : scaled_randn(p->shape, p->shape.size() == 2 ? 1.0 / std::sqrt(double(p->shape[1])) : 0.1, seed++);
  }
  nn::load_state_dict(block, state, load);
  return nn::parameters_of(block);
}

// 2 FLOP per multiply-add: projections of the video tokens (self q k v o, cross q o, FFN), the text
// keys and values, and the two attentions.
double block_gflop(int64_t s) {
  const double d = kDim;
  return (2.0 * s * (6 * d * d + 2 * d * kFfn) + 2.0 * kText * 2 * d * d + 4.0 * s * s * d + 4.0 * s * kText * d) / 1e9;
}

struct Run {
  Timing timing;
  std::vector<comm::RankStats> stats;
};

Run time_block(int ring, int ulysses, int64_t tokens, const nn::StateDict& weights, const nn::LoadOptions& load,
               int repeats) {
  const auto grid = grid_for(tokens);
  const Tensor latent_shape = Tensor::empty({1, kChannels, grid[0] * kPatch[0], grid[1] * kPatch[1], grid[2] * kPatch[2]});
  const auto rope = models::wan::RotaryPosEmbed(kHeadDim, kPatch, 1024).forward(latent_shape);
  const Tensor x = pipeline::randn({1, tokens, kDim}, 11), text = pipeline::randn({1, kText, kDim}, 12);
  const Tensor temb = scaled_randn({1, 6, kDim}, 0.1, 13);

  Run run;
  std::mutex mutex;
  comm::LocalOptions one_thread_each;
  one_thread_each.threads_per_rank = 1;
  run.stats = comm::run_local(ring * ulysses, [&](comm::Communicator& world) {
    Block block(kDim, kHeads, kHeadDim, kFfn, /*cross_attn_norm=*/true, 1e-6f);
    nn::load_state_dict(block, weights, load);
    std::optional<parallel::ParallelContext> context;
    std::optional<attention::ScopedRouter> bind;
    Tensor xl = x, cos = rope[0], sin = rope[1];
    if (ring * ulysses > 1) {
      parallel::ContextParallelConfig config;
      config.ring_degree = ring;
      config.ulysses_degree = ulysses;
      context.emplace(std::shared_ptr<comm::Communicator>(&world, [](comm::Communicator*) {}), config);
      bind.emplace(&*context);
      comm::Communicator& flat = context->mesh().flat();
      xl = parallel::shard(x, 1, flat);
      cos = parallel::shard(rope[0], 1, flat);
      sin = parallel::shard(rope[1], 1, flat);
    }
    Timing t = measure([&] { block.forward(xl, text, temb, cos, sin); }, repeats);
    std::lock_guard lock(mutex);
    if (world.rank() == 0) run.timing = t;
  }, one_thread_each);
  return run;
}

}  // namespace

void run_wan_model_bench(const WanBenchArgs& args) {
  const nn::LoadOptions load = nn::load_options(args.dtype);  // the random weights are f32: auto is f32
  std::vector<int64_t> token_counts = args.tokens;
  if (token_counts.empty()) token_counts = args.quick ? std::vector<int64_t>{1950} : std::vector<int64_t>{1950, 7800};

  Block block(kDim, kHeads, kHeadDim, kFfn, /*cross_attn_norm=*/true, 1e-6f);
  const nn::StateDict weights = random_block_weights(block, load);
  int64_t weight_bytes = 0;
  for (const auto& [name, t] : weights) weight_bytes += int64_t(t.nbytes());

  struct Layout {
    int ring, ulysses;
    const char* name;
  };
  std::vector<Layout> layouts{{1, 1, "single_rank"}, {1, 2, "ulysses"}};
  if (!args.quick) layouts.push_back({2, 1, "ring"});
  for (int64_t tokens : token_counts) {
    double base = 0, base_cpu = 0;
    for (const Layout& l : layouts) {
      Run r = time_block(l.ring, l.ulysses, tokens, weights, load, args.repeats);
      if (l.ring * l.ulysses == 1) base = r.timing.min_s;
      std::vector<int64_t> peaks;
      for (const auto& s : r.stats) peaks.push_back(s.peak_bytes);
      auto j = line("model");
      j["model"] = "wan";
      j["block"] = "wan2.1-1.3b";
      j["video_tokens"] = tokens;
      j["text_tokens"] = kText;
      j["ranks"] = l.ring * l.ulysses;
      j["layout"] = l.name;
      j["ring"] = l.ring;
      j["ulysses"] = l.ulysses;
      j["threads_per_rank"] = 1;
      j["dtype"] = args.dtype;
      j["min_s"] = r.timing.min_s;
      j["median_s"] = r.timing.median_s;
      j["gflop"] = block_gflop(tokens);
      j["gflops"] = block_gflop(tokens) / r.timing.min_s;
      j["speedup_vs_1_rank"] = base / r.timing.min_s;
      // On an oversubscribed machine wall time includes time descheduled: process CPU time of the
      // cheapest repeat, shared out over the ranks (each runs one thread), is the steadier figure.
      j["cpu_s_per_rank"] = r.timing.cpu_min_s / (l.ring * l.ulysses);
      if (l.ring * l.ulysses == 1) base_cpu = r.timing.cpu_min_s;
      j["cpu_speedup_vs_1_rank"] = base_cpu / (r.timing.cpu_min_s / (l.ring * l.ulysses));
      j["peak_activation_bytes_per_rank"] = peaks;
      j["shared_weight_bytes"] = weight_bytes;  // one copy for all thread ranks
      print(j);
    }
  }
}

}  // namespace cpdit::bench
