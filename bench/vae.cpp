// cpdit bench vae: one VAE decode at real widths with random weights (seeded), on 1 rank and split by
// rows (for wan, or by frames: --split) over P local ranks (parallel/halo.hpp): seconds (min and
// median of the repeats, process CPU time, and at one thread per rank the busiest rank's CPU time),
// Winograd's weight transforms (wall seconds, and their share of the fastest decode),
// peak tensor memory per rank, the weights' bytes, the process's peak resident memory over the
// decodes (local ranks are threads of this one process, so for P ranks it holds all P ranks' memory),
// and the P-rank speedup, memory ratio and largest
// difference against 1 rank, measured in the same run; with --compare-direct also the difference
// Winograd makes (one more 1-rank decode with every convolution summed directly).
// bench/vae_torch.py runs diffusers' decode on the same shapes beside it.
//   flux: AutoencoderKL as FLUX.1 ships it (16 latent channels, blocks 128/256/512/512, 2 layers).
//   wan:  AutoencoderKLWan as Wan 2.1 ships it (base 96, z 16, dim_mult 1/2/4/4, 2 res blocks).
#include "command.hpp"
#include "measure.hpp"

#include <cpdit/comm/local.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/core/memory.hpp>
#include <cpdit/core/weight.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/kernels/image.hpp>
#include <cpdit/models/vae/autoencoder_kl.hpp>
#include <cpdit/models/vae/autoencoder_kl_wan.hpp>
#include <cpdit/nn/load.hpp>
#include <cpdit/pipeline/random.hpp>

#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <memory>

namespace cpdit::bench {
namespace {

struct VaeBenchArgs {
  std::string model = "flux";
  int64_t height = 0, width = 0, frames = 17;  // 0: the model's real size (1024x1024, or 480x832)
  std::vector<int> ranks{1, 2};
  int threads = 1;  // compute threads per rank
  int repeats = 3;
  std::string conv = "fastest";  // kernels::ConvAlgorithm for the whole run
  std::string split = "rows";    // wan: models::vae::VideoSplit
  bool compare_direct = false;
};

// Conv and Linear weights ~ N(0, 1/fan_in), norm scales 1, biases small: activations stay O(1).
nn::StateDict random_weights(nn::Module& model) {
  nn::StateDict state;
  uint64_t seed = 1;
  for (auto& [name, p] : model.named_parameters()) {
    int64_t fan_in = 1;
    for (size_t i = 1; i < p->shape.size(); ++i) fan_in *= p->shape[i];
    const bool scale = name.ends_with("gamma") || (name.find("norm") != std::string::npos && name.ends_with(".weight"));
    const double std = scale ? 0.0 : (p->shape.size() >= 2 && fan_in > 1 ? 1.0 / std::sqrt(double(fan_in)) : 0.1);
    state[name] = scale ? Tensor::full(p->shape, 1.0)
                        : kernels::mul(pipeline::randn(p->shape, seed++), Tensor::full({1}, std));
  }
  nn::load_state_dict(model, state);
  return nn::parameters_of(model);
}

struct Case {
  std::function<std::unique_ptr<nn::Model>()> replica;
  std::function<Tensor(const nn::Model&, const Tensor&)> decode;
  Tensor latents;
};

// Random weights drawn once; every rank's replica shares them.
// `prepare` sets a replica up before enable_parallelism (Wan's video split).
template <class Vae, class Config>
void set_model(Case& c, const Config& config, std::function<void(Vae&)> prepare = {}) {
  auto first = std::make_unique<Vae>(config);
  auto state = std::make_shared<nn::StateDict>(random_weights(*first));
  c.replica = [config, state, prepare]() -> std::unique_ptr<nn::Model> {
    auto m = std::make_unique<Vae>(config);
    nn::load_state_dict(*m, *state);
    if (prepare) prepare(*m);
    return m;
  };
  c.decode = [](const nn::Model& m, const Tensor& z) { return static_cast<const Vae&>(m).decode(z); };
}

Case make_case(const VaeBenchArgs& a) {
  Case c;
  if (a.model == "flux") {
    models::vae::KLConfig config;
    config.latent_channels = 16;
    config.block_out_channels = {128, 256, 512, 512};
    config.layers_per_block = 2;
    config.use_quant_conv = config.use_post_quant_conv = false;
    set_model<models::vae::AutoencoderKL>(c, config);
    c.latents = pipeline::randn({1, 16, (a.height ? a.height : 1024) / 8, (a.width ? a.width : 1024) / 8}, 7);
  } else if (a.model == "wan") {
    CPDIT_CHECK(a.split == "rows" || a.split == "frames", invalid_argument,
                "bench vae: --split must be rows or frames, got '", a.split, "'");
    const auto split = a.split == "frames" ? models::vae::VideoSplit::frames : models::vae::VideoSplit::rows;
    set_model<models::vae::AutoencoderKLWan>(c, models::vae::WanVaeConfig{},
                                             [split](models::vae::AutoencoderKLWan& m) { m.set_video_split(split); });
    CPDIT_CHECK(a.frames >= 1 && (a.frames - 1) % 4 == 0, invalid_argument, "bench vae: --frames must be 4k+1, got ", a.frames);
    c.latents = pipeline::randn({1, 16, (a.frames - 1) / 4 + 1, (a.height ? a.height : 480) / 8, (a.width ? a.width : 832) / 8}, 7);
  } else {
    fail(ErrorKind::invalid_argument, "bench vae: --model must be flux or wan, got '", a.model, "'");
  }
  return c;
}

// max |a - b| over the range of b: the measure the fixtures' README uses.
double relative_to_range(const Tensor& a, const Tensor& b) {
  const float* p = b.data<float>();
  const auto [lo, hi] = std::minmax_element(p, p + b.numel());
  return max_abs_diff(a, b) / std::max(double(*hi) - double(*lo), 1e-30);
}

// One decode of c.latents on `ranks` local ranks: rank 0's sample, the largest per-rank peak, and
// (at one compute thread per rank, where a rank's work is its thread's) the busiest rank's CPU time:
// under load, the wall time the decode would take on idle cores, serial parts (one rank working while
// the others wait) included.
Tensor decode_on(const Case& c, int ranks, int threads, int64_t& peak, double& busiest_rank_cpu) {
  comm::LocalOptions options;
  options.threads_per_rank = threads;
  Tensor sample;
  std::vector<double> rank_cpu(size_t(ranks), 0.0);
  const auto stats = comm::run_local(ranks, [&](comm::Communicator& comm) {
    const double start = thread_cpu_seconds();
    auto model = c.replica();
    if (ranks > 1)
      model->enable_parallelism(std::shared_ptr<comm::Communicator>(&comm, [](comm::Communicator*) {}),
                                parallel::ContextParallelConfig{ranks, 1});
    Tensor out = c.decode(*model, c.latents);
    if (comm.rank() == 0) sample = out;
    rank_cpu[size_t(comm.rank())] = thread_cpu_seconds() - start;
  }, options);
  for (const auto& s : stats) peak = std::max(peak, s.peak_bytes);
  busiest_rank_cpu = *std::max_element(rank_cpu.begin(), rank_cpu.end());
  return sample;
}

void run(const VaeBenchArgs& a) {
  CPDIT_CHECK(a.conv == "fastest" || a.conv == "direct", invalid_argument,
              "bench vae: --conv must be fastest or direct, got '", a.conv, "'");
  kernels::set_default_conv_algorithm(a.conv == "direct" ? kernels::ConvAlgorithm::direct
                                                         : kernels::ConvAlgorithm::fastest);
  const Case c = make_case(a);
  double one_rank_min = 0, one_rank_cpu = 0, one_rank_busiest = 0;
  int64_t one_rank_peak = 0;
  Tensor one_rank_sample;
  for (int ranks : a.ranks) {
    int64_t peak = 0;
    // Each rank count starts with an empty cache and its own peak resident set, so that the P-rank
    // line does not carry the blocks of the 1-rank decodes (nor glibc's free heap pages).
    memory::release_cache();
    malloc_trim(0);
    const bool rss_reset = reset_peak_resident();
    const int64_t rss_before = resident_bytes();
    const memory::AllocatorStats cache_before = memory::allocator_stats();
    // The first decode (measure's warm-up) also pays what a process pays once: oneDNN generating its
    // kernels, the allocator's first pages.
    double busiest = INFINITY, first = -1, transform = INFINITY;
    Tensor sample;
    const Timing t = measure([&] {
      double b = 0;
      const double transform_before = kernels::weight_transform_stats().seconds;
      sample = decode_on(c, ranks, a.threads, peak, b);
      transform = std::min(transform, kernels::weight_transform_stats().seconds - transform_before);
      busiest = std::min(busiest, b);
      if (first < 0) first = b;
    }, a.repeats);
    if (ranks == 1) {
      one_rank_min = t.min_s;
      one_rank_cpu = t.cpu_min_s;
      one_rank_busiest = busiest;
      one_rank_peak = peak;
      one_rank_sample = sample;
    }
    nlohmann::json j = line("vae");
    j.update({{"model", a.model}, {"latents", c.latents.shape()}, {"ranks", ranks}, {"threads_per_rank", a.threads},
              {"conv", a.conv}, {"split", a.model == "wan" ? a.split : "rows"}, {"repeats", a.repeats},
              {"min_s", t.min_s}, {"median_s", t.median_s},
              {"cpu_min_s", t.cpu_min_s}, {"peak_bytes_per_rank", peak},
              {"weight_transform_min_s", transform}, {"weight_transform_share", transform / t.min_s},
              {"weight_bytes", weight_memory_counter().current()}});
    // What the process held: its resident set before and at most during the decodes, the most the
    // caching allocator had in use (tensors and weights of all ranks, in whole blocks; it keeps at
    // most an eighth more cached), and how often a decode's block was not in its cache.
    const memory::AllocatorStats cache = memory::allocator_stats();
    j.update({{"process_rss_before_bytes", rss_before}, {"process_peak_rss_bytes", peak_resident_bytes()},
              {"process_peak_rss_since", rss_reset ? "these decodes" : "process start"},
              {"allocator_peak_in_use_bytes", cache.peak_in_use},
              {"allocator_misses", cache.misses - cache_before.misses},
              {"allocator_moved_bytes", cache.moved - cache_before.moved}});
    if (a.threads == 1) j.update({{"busiest_rank_cpu_min_s", busiest}, {"first_decode_busiest_rank_cpu_s", first}});
    if (one_rank_min > 0 && ranks > 1)
      j.update({{"speedup_over_1_rank", one_rank_min / t.min_s},
                {"cpu_over_1_rank", t.cpu_min_s / one_rank_cpu},
                {"busiest_rank_cpu_speedup", a.threads == 1 ? one_rank_busiest / busiest : NAN},
                {"peak_over_1_rank", double(peak) / double(one_rank_peak)},
                {"diff_vs_1_rank_over_range", relative_to_range(sample, one_rank_sample)}});
    print(j);
  }
  if (a.compare_direct && one_rank_sample.defined()) {
    kernels::set_default_conv_algorithm(kernels::ConvAlgorithm::direct);
    int64_t peak = 0;
    double busiest = 0;
    const Tensor direct = decode_on(c, 1, a.threads, peak, busiest);
    nlohmann::json j = line("vae_direct_difference");
    j.update({{"model", a.model}, {"latents", c.latents.shape()}, {"conv", a.conv},
              {"diff_vs_direct_over_range", relative_to_range(one_rank_sample, direct)}});
    print(j);
  }
}

void add_vae_bench(CLI::App& parent) {
  auto a = std::make_shared<VaeBenchArgs>();
  CLI::App* cmd = parent.add_subcommand("vae", "one VAE decode (FLUX.1 or Wan 2.1 widths) on 1 and P ranks");
  cmd->add_option("--model", a->model, "flux | wan")->capture_default_str();
  cmd->add_option("--height", a->height, "image height in pixels (default 1024 for flux, 480 for wan)");
  cmd->add_option("--width", a->width, "image width in pixels (default 1024 for flux, 832 for wan)");
  cmd->add_option("--frames", a->frames, "video frames for wan, 4k+1")->capture_default_str();
  cmd->add_option("--ranks", a->ranks, "local rank counts (default 1 2)");
  cmd->add_option("--threads", a->threads, "compute threads per rank")->capture_default_str();
  cmd->add_option("--repeats", a->repeats, "timed repeats after one warm-up")->capture_default_str();
  cmd->add_option("--split", a->split, "wan: rows | frames (how P ranks split the video)")->capture_default_str();
  cmd->add_option("--conv", a->conv, "fastest (Winograd on wide layers) | direct")->capture_default_str();
  cmd->add_flag("--compare-direct", a->compare_direct,
                "also decode once on 1 rank with direct convolutions and print the difference");
  cmd->callback([a] { run(*a); });
}

const bool registered = app::register_bench("vae", add_vae_bench);

}  // namespace
}  // namespace cpdit::bench
