// cpdit bench attention: forward and backward of each backend at long sequence lengths, against
// oneDNN sgemm measured in the same run (the ratio is what the targets are stated in).
//   FLOPs: forward 4 B H S S_kv D (two GEMMs), backward 2.5x that (five GEMMs); under a mask rule,
//   only the visible (i, j) pairs count. --kv-seq gives keys a length of their own (cross-attention:
//   LTX-Video's 1536 video tokens attend to 128 text tokens).
// With --mask causal|block-causal each case runs unmasked and masked in the same run, so the lines
// show what tile skipping saves (time ratio to full) and that peak extra memory stays O(S D).
#include "command.hpp"
#include "measure.hpp"
#include "weight_flags.hpp"

#include <cpdit/attention/attention.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/core/memory.hpp>
#include <cpdit/core/threads.hpp>
#include <cpdit/nn/load.hpp>

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <tuple>
#include <vector>

namespace cpdit::bench {
namespace {

struct AttentionBenchArgs {
  bool quick = false;
  std::vector<int64_t> seqs;
  std::vector<int> threads;
  std::vector<std::string> backends{"flash", "native"};
  int64_t heads = 0;  // 0: chosen per S
  int64_t head_dim = 128;
  int64_t kv_seq = 0;  // 0: the keys are as long as the queries
  int repeats = 3;
  std::string mask = "none";  // none | causal | block-causal
  int64_t blocks = 8;         // block-causal: the sequence is this many blocks ("frame blocks")
  std::string dtype = "f32";  // f32 | bf16: the matmul precision the flash tiles run in
};

attention::Mask mask_for(const std::string& name, int64_t seq, int64_t blocks) {
  if (name == "causal") return attention::Mask::causal();
  if (name == "block-causal") return attention::Mask::block_causal(std::max<int64_t>(1, (seq + blocks - 1) / blocks));
  return attention::Mask::none();
}

// Visible (query, key) pairs of an S x S call: the rule's share of the full attention's FLOPs.
double visible_fraction(const attention::Mask& mask, int64_t seq) {
  if (!mask.has_rule()) return 1.0;
  double pairs = 0;
  for (int64_t i = 0; i < seq; ++i) pairs += double(std::min(seq, mask.last_visible_key(i) + 1));
  return pairs / (double(seq) * double(seq));
}

struct Gflops {
  double wall = 0, cpu = 0;  // per wall second (min), per CPU second (min)
};

// sgemm at the size of one attention head's score GEMM at S = 4096 (M = N = 4096, K = D).
Gflops sgemm_gflops(int64_t head_dim, int repeats) {
  const int64_t n = 4096;
  Tensor a = random_tensor({n, head_dim}, 1), b = random_tensor({n, head_dim}, 2), c = Tensor::empty({n, n});
  // The machine is often shared: process CPU time (summed over threads) is reported beside wall
  // time, so one-thread ratios stay meaningful when the cores are oversubscribed.
  Timing m = measure([&] {
    dnnl_sgemm('N', 'T', n, n, head_dim, 1.0f, a.data<float>(), head_dim, b.data<float>(), head_dim, 0.0f,
               c.data<float>(), n);
  }, repeats);
  const double flops = 2.0 * n * n * head_dim;
  return {flops / m.min_s / 1e9, flops / m.cpu_min_s / 1e9};
}

// Heads per case so one forward stays around a few seconds on one thread.
int64_t heads_for(int64_t seq, const AttentionBenchArgs& args) {
  if (args.heads > 0) return args.heads;
  return seq <= 1024 ? 8 : seq <= 4096 ? 4 : 1;
}

// The score buffers native allocates: S x S_kv per thread, twice in backward.
int64_t native_score_bytes(int64_t seq, int64_t kv_seq, int threads) { return 2 * int64_t(threads) * seq * kv_seq * 4; }

template <class Fn>
int64_t peak_extra_bytes(Fn fn) {
  memory::reset_peak();
  const int64_t before = memory::current_bytes();
  fn();
  return memory::peak_bytes() - before;
}

// Forward and backward times of one backend on one mask, with the peak extra memory of each pass.
struct PassResults {
  Timing fwd, bwd;
  int64_t fwd_bytes = 0, bwd_bytes = 0;
};

PassResults time_passes(const attention::Backend& backend, const Tensor& q, const Tensor& k,
                        const Tensor& v, const Tensor& dout, const attention::Mask& mask, float scale,
                        int repeats) {
  PassResults r;
  attention::Result fwd;
  r.fwd_bytes = peak_extra_bytes([&] { fwd = backend.forward(q, k, v, mask, scale); });
  r.fwd = measure([&] { fwd = backend.forward(q, k, v, mask, scale); }, repeats);
  r.bwd_bytes = peak_extra_bytes([&] { backend.backward(dout, q, k, v, fwd.out, fwd.lse, mask, scale); });
  r.bwd = measure([&] { backend.backward(dout, q, k, v, fwd.out, fwd.lse, mask, scale); }, repeats);
  return r;
}

void run_case(const AttentionBenchArgs& args, const std::string& name, int64_t seq, int threads,
              Gflops sgemm) {
  const int64_t B = 1, H = heads_for(seq, args), D = args.head_dim, kv_seq = args.kv_seq > 0 ? args.kv_seq : seq;
  const double fwd_flops = 4.0 * B * H * double(seq) * double(kv_seq) * D;
  nlohmann::json base = line("attention");
  base.update({{"backend", name}, {"dtype", args.dtype}, {"B", B}, {"S", seq}, {"S_kv", kv_seq}, {"H", H}, {"D", D},
               {"threads", threads}, {"sgemm_gflops", sgemm.wall}, {"sgemm_gflops_per_cpu_s", sgemm.cpu},
               {"sgemm_shape", "4096x4096x" + std::to_string(D)}});
  if (name == "native" && native_score_bytes(seq, kv_seq, threads) > (int64_t(1) << 30)) {
    for (const char* pass : {"fwd", "bwd"}) {
      nlohmann::json j = base;
      j.update({{"pass", pass}, {"skipped", "native needs S x S score buffers per thread"},
                {"native_score_bytes", native_score_bytes(seq, kv_seq, threads)}});
      print(j);
    }
    return;
  }
  const attention::Backend& backend = attention::backend(name);
  const Tensor q = random_tensor({B, seq, H, D}, 3), k = random_tensor({B, kv_seq, H, D}, 4),
               v = random_tensor({B, kv_seq, H, D}, 5), dout = random_tensor({B, seq, H, D}, 6);
  const float scale = float(1.0 / std::sqrt(double(D)));
  // The unmasked run first: masked lines report their time as a ratio to it.
  std::vector<attention::Mask> masks{attention::Mask::none()};
  if (args.mask != "none") masks.push_back(mask_for(args.mask, seq, args.blocks));
  PassResults full;
  for (const attention::Mask& mask : masks) {
    const PassResults r = time_passes(backend, q, k, v, dout, mask, scale, args.repeats);
    if (!mask.has_rule()) full = r;
    const double share = visible_fraction(mask, seq);
    // Extra bytes per element of one (B, S, H, D) tensor: constant in S when memory is O(S D).
    const double tensor_bytes = double(B * seq * H * D) * sizeof(float);
    for (auto [pass, t, t_full, flops, bytes] :
         {std::tuple{"fwd", r.fwd, full.fwd, fwd_flops * share, r.fwd_bytes},
          std::tuple{"bwd", r.bwd, full.bwd, 2.5 * fwd_flops * share, r.bwd_bytes}}) {
      nlohmann::json j = base;
      const double gflops = flops / t.min_s / 1e9, per_cpu = flops / t.cpu_min_s / 1e9;
      j.update({{"pass", pass}, {"mask", attention::mask_rule_name(mask.rule)},
                {"seconds_min", t.min_s}, {"seconds_median", t.median_s},
                {"cpu_seconds_min", t.cpu_min_s}, {"gflops", gflops}, {"gflops_per_cpu_s", per_cpu},
                {"ratio_to_sgemm", gflops / sgemm.wall}, {"ratio_to_sgemm_cpu", per_cpu / sgemm.cpu},
                {"peak_extra_bytes", bytes}, {"peak_extra_per_qkv_tensor", double(bytes) / tensor_bytes}});
      if (mask.has_rule())
        j.update({{"block", mask.block}, {"visible_fraction", share},
                  {"seconds_ratio_to_full", t.min_s / t_full.min_s},
                  {"cpu_seconds_ratio_to_full", t.cpu_min_s / t_full.cpu_min_s}});
      print(j);
    }
  }
}

void run(const AttentionBenchArgs& given) {
  AttentionBenchArgs args = given;
  if (args.seqs.empty()) args.seqs = args.quick ? std::vector<int64_t>{1024} : std::vector<int64_t>{1024, 4096, 16384};
  if (args.threads.empty()) args.threads = {1, hardware_threads()};
  std::sort(args.threads.begin(), args.threads.end());
  args.threads.erase(std::unique(args.threads.begin(), args.threads.end()), args.threads.end());
  if (args.quick) args.repeats = 1;
  CPDIT_CHECK(args.kv_seq == 0 || args.mask == "none", invalid_argument,
              "bench attention: --mask rules are over one sequence; leave them out with --kv-seq");
  const ScopedMatmulPrecision precision(nn::matmul_precision_for(args.dtype));
  for (int threads : args.threads) {
    ScopedComputeThreads scoped(threads);
    const Gflops sgemm = sgemm_gflops(args.head_dim, args.repeats);
    for (int64_t seq : args.seqs)
      for (const std::string& name : args.backends) run_case(args, name, seq, threads, sgemm);
  }
}

void add_attention_bench(CLI::App& parent) {
  auto args = std::make_shared<AttentionBenchArgs>();
  CLI::App* cmd = parent.add_subcommand("attention", "Attention backends (forward, backward) against sgemm");
  cmd->add_flag("--quick", args->quick, "S = 1024 only, one repeat");
  cmd->add_option("--seq", args->seqs, "sequence lengths (default 1024 4096 16384)");
  cmd->add_option("--threads", args->threads, "thread counts (default 1 and all)");
  cmd->add_option("--backend", args->backends, "backends (default flash native)");
  cmd->add_option("--heads", args->heads, "heads (default: 8, 4, 1 for S <= 1024, 4096, more)");
  cmd->add_option("--head-dim", args->head_dim, "head dim (default 128)");
  cmd->add_option("--kv-seq", args->kv_seq, "key/value length (default: each --seq; cross-attention)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--repeats", args->repeats, "timed repeats (default 3)");
  cmd->add_option("--dtype", args->dtype,
                  "f32, or bf16 (as --dtype bf16 of generate: flash's tile products in bf16, f32 accumulation)")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--mask", args->mask, "also run with this mask rule, beside unmasked (default none)")
      ->check(CLI::IsMember({"none", "causal", "block-causal"}));
  cmd->add_option("--blocks", args->blocks, "block-causal: blocks per sequence (default 8)")
      ->check(CLI::PositiveNumber);
  cmd->callback([args] { run(*args); });
}

const bool registered = app::register_bench("attention", add_attention_bench);

}  // namespace
}  // namespace cpdit::bench
