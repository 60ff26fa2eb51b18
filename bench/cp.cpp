// cpdit bench cp: context-parallel attention forward on P ranks (threads, one compute thread each)
// against 1 rank measured in the same run. Per mode: time, speedup, how much of the communication
// was hidden behind compute, and the KV bytes a rank held at peak.
//
// Hidden fraction = 1 - (time blocked in waits and collectives during the real call) / (time of
// the same call with a backend that computes nothing, i.e. the communication alone).
#include "command.hpp"
#include "measure.hpp"

#include <cpdit/attention/attention.hpp>
#include <cpdit/comm/local.hpp>
#include <cpdit/parallel/context.hpp>
#include <cpdit/parallel/shard.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>

namespace cpdit::bench {
namespace {

using parallel::ContextParallelConfig;
using parallel::RotateMethod;

struct CpBenchArgs {
  bool quick = false;
  std::vector<int64_t> seqs;
  int ranks = 2;
  int64_t heads = 8, head_dim = 128;
  int repeats = 1;
  std::string backend = "flash";
};

struct Mode {
  int ring, ulysses;
  RotateMethod rotate;
};

// Returns garbage of the right shapes at no cost: what is left of a call is its communication.
class NoComputeBackend final : public attention::Backend {
 public:
  std::string name() const override { return "no_compute"; }
  attention::Capabilities capabilities() const override {
    attention::Capabilities c;
    c.returns_lse = c.backward = c.key_padding_mask = c.gqa = c.ring = c.ulysses = c.unified = true;
    c.dtypes = {DType::f32, DType::bf16, DType::f16};
    return c;
  }
  attention::Result forward(const Tensor& q, const Tensor&, const Tensor&, const attention::Mask&,
                            float) const override {
    return {Tensor::empty(q.shape(), q.dtype()), Tensor::zeros({q.size(0), q.size(2), q.size(1)})};
  }
  attention::Grads backward(const Tensor&, const Tensor& q, const Tensor& k, const Tensor& v,
                            const Tensor&, const Tensor&, const attention::Mask&,
                            float) const override {
    return {Tensor::empty(q.shape()), Tensor::empty(k.shape()), Tensor::empty(v.shape())};
  }
};

double seconds(const std::function<void()>& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

const char* mode_name(const Mode& m) {
  if (m.ring > 1 && m.ulysses > 1) return "unified";
  if (m.ring > 1) return "ring";
  return m.ulysses > 1 ? "ulysses" : "local";
}

struct RankNumbers {
  Timing time;
  double wait_s = 0, alone_s = 0;  // per call
  int64_t peak_kv_bytes = 0, peak_rank_bytes = 0;
};

void run_case(const CpBenchArgs& args, int64_t seq) {
  const int64_t B = 1, H = args.heads, D = args.head_dim;
  const Tensor q = random_tensor({B, seq, H, D}, 1), k = random_tensor({B, seq, H, D}, 2),
               v = random_tensor({B, seq, H, D}, 3);
  const attention::Backend& backend = attention::backend(args.backend);
  const float scale = float(1.0 / std::sqrt(double(D)));
  comm::LocalOptions one_thread;
  one_thread.threads_per_rank = 1;

  Timing single;
  comm::run_local(1, [&](comm::Communicator&) {
    single = measure([&] { backend.forward(q, k, v, {}, scale); }, args.repeats);
  }, one_thread);
  const int64_t full_kv_bytes = int64_t(k.nbytes() + v.nbytes());
  nlohmann::json base = line("cp");
  base.update({{"backend", args.backend}, {"B", B}, {"S", seq}, {"H", H}, {"D", D},
               {"threads_per_rank", 1}, {"full_kv_bytes", full_kv_bytes}});
  {
    nlohmann::json j = base;
    j.update({{"mode", "local"}, {"rotate", "none"}, {"R", 1}, {"U", 1}, {"ranks", 1},
              {"seconds_min", single.min_s}, {"seconds_median", single.median_s}, {"speedup", 1.0}});
    print(j);
  }

  std::vector<Mode> modes = {{args.ranks, 1, RotateMethod::p2p},
                             {args.ranks, 1, RotateMethod::allgather},
                             {1, args.ranks, RotateMethod::p2p}};
  for (int u = args.ranks / 2; u > 1; --u)
    if (args.ranks % u == 0 && args.ranks / u > 1) {
      modes.push_back({args.ranks / u, u, RotateMethod::p2p});
      break;
    }
  for (const Mode& mode : modes) {
    ContextParallelConfig config;
    config.ring_degree = mode.ring;
    config.ulysses_degree = mode.ulysses;
    config.rotate_method = mode.rotate;
    std::vector<RankNumbers> numbers(size_t(args.ranks));
    const auto stats = comm::run_local(args.ranks, [&](comm::Communicator& comm) {
      parallel::ParallelContext context({&comm, [](comm::Communicator*) {}}, config);
      const Tensor ql = parallel::shard(q, 1, comm), kl = parallel::shard(k, 1, comm),
                   vl = parallel::shard(v, 1, comm);
      RankNumbers& mine = numbers[size_t(comm.rank())];
      const NoComputeBackend no_compute;
      context.forward(no_compute, ql, kl, vl, {});  // warm the buffers
      comm.barrier();
      mine.alone_s = seconds([&] { context.forward(no_compute, ql, kl, vl, {}); });
      context.stats().reset();
      mine.time = measure([&] {
        comm.barrier();
        context.forward(backend, ql, kl, vl, {});
      }, args.repeats);
      mine.wait_s = context.stats().wait_seconds / double(args.repeats + 1);
      mine.peak_kv_bytes = context.stats().peak_kv_bytes;
    }, one_thread);
    double wait = 0, alone = 0;
    int64_t peak_kv = 0, peak_rank = 0;
    for (size_t r = 0; r < numbers.size(); ++r) {
      wait += numbers[r].wait_s / double(numbers.size());
      alone += numbers[r].alone_s / double(numbers.size());
      peak_kv = std::max(peak_kv, numbers[r].peak_kv_bytes);
      peak_rank = std::max(peak_rank, stats[r].peak_bytes);
    }
    const Timing& t = numbers[0].time;
    nlohmann::json j = base;
    j.update({{"mode", mode_name(mode)}, {"rotate", parallel::rotate_method_name(mode.rotate)},
              {"R", mode.ring}, {"U", mode.ulysses}, {"ranks", args.ranks},
              {"seconds_min", t.min_s}, {"seconds_median", t.median_s},
              {"speedup", single.median_s / t.median_s},
              {"comm_wait_s", wait}, {"comm_alone_s", alone},
              {"comm_hidden_fraction", alone > 0 ? std::clamp(1.0 - wait / alone, 0.0, 1.0) : 1.0},
              {"peak_kv_bytes", peak_kv}, {"kv_fraction", double(peak_kv) / double(full_kv_bytes)},
              {"peak_rank_bytes", peak_rank}});
    print(j);
  }
}

void run(const CpBenchArgs& given) {
  CpBenchArgs args = given;
  if (args.seqs.empty())
    args.seqs = args.quick ? std::vector<int64_t>{2048} : std::vector<int64_t>{8192, 32768};
  for (int64_t seq : args.seqs) run_case(args, seq);
}

void add_cp_bench(CLI::App& parent) {
  auto args = std::make_shared<CpBenchArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "cp", "Context-parallel attention forward (ring p2p/allgather, Ulysses, unified) vs 1 rank");
  cmd->add_flag("--quick", args->quick, "S = 2048 only");
  cmd->add_option("--seq", args->seqs, "sequence lengths (default 8192 32768)");
  cmd->add_option("--ranks", args->ranks, "ranks of the parallel runs (default 2)")->check(CLI::Range(2, 64));
  cmd->add_option("--heads", args->heads, "heads (default 8)");
  cmd->add_option("--head-dim", args->head_dim, "head dim (default 128)");
  cmd->add_option("--repeats", args->repeats, "timed repeats after one warm-up (default 1)");
  cmd->add_option("--backend", args->backend, "attention backend (default flash)");
  cmd->callback([args] { run(*args); });
}

const bool registered = app::register_bench("cp", add_cp_bench);

}  // namespace
}  // namespace cpdit::bench
