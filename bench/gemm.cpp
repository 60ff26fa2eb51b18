// cpdit bench gemm: raw sgemm of each GEMM library on this machine, and cpdit's Linear, at the
// projection shapes of the models. Every line carries GFLOP/s (2 M N K / time) over the minimum and
// the median of the repeats, in wall time and in process CPU time (on a loaded machine wall time
// counts time spent descheduled, and misled an earlier comparison by a factor of 4); Linear lines
// carry their ratio to the raw sgemm they are built on, measured in the same run (the target is
// >= 0.95 for f32).
//   x (M, K) times W (N, K) transposed, as a Linear layer stores its weight.
#include "command.hpp"
#include "measure.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/core/precision.hpp>
#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/kernels/isa.hpp>

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <cstdlib>
#include <cstring>
#include <sstream>

#ifdef CPDIT_HAVE_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int num_threads);  // OpenBLAS' own pool ignores OpenMP's
#endif

namespace cpdit::bench {
namespace {

struct GemmBenchArgs {
  std::vector<std::string> shapes{"4096x3072x3072"};
  std::vector<int> threads;
  int repeats = 3;
  std::vector<std::string> ops;  // empty: all
  int weight_copies = 1;
  int64_t weight_offset = 0;  // bytes past a 64-byte line where each bf16 weight starts
};

struct GemmShape {
  int64_t m, n, k;
};

GemmShape parse_shape(const std::string& text) {
  GemmShape s{};
  char x1 = 0, x2 = 0;
  std::istringstream in(text);
  in >> s.m >> x1 >> s.n >> x2 >> s.k;
  CPDIT_CHECK(in && in.eof() && x1 == 'x' && x2 == 'x' && s.m > 0 && s.n > 0 && s.k > 0, invalid_argument,
              "bench gemm: shape '", text, "' must be MxNxK, e.g. 4096x3072x3072");
  return s;
}

// The machine is shared: a load above the core count means the all-thread lines are contended.
double load_average() {
  double load = 0;
  return getloadavg(&load, 1) == 1 ? load : -1.0;
}

// Bias strategy that Linear does not use, kept here to show the choice: GEMM with beta = 0, then a
// second pass that adds the bias (read and write y) instead of broadcasting it first (write y).
void gemm_then_bias_pass(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  float* out = y.data<float>();
  const float* bias = b.data<float>();
  kernels::gemm(false, true, m, n, k, 1.0f, x.data<float>(), k, w.data<float>(), k, 0.0f, out, n);
#pragma omp parallel for num_threads(compute_threads())
  for (int64_t r = 0; r < m; ++r) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) out[r * n + j] += bias[j];
  }
}

// `w`'s values in a view that starts `offset` bytes past a 64-byte line, where a mapped checkpoint's
// tensors may sit (safetensors aligns them to 8 bytes, GGUF to 32).
Tensor off_the_line(const Tensor& w, int64_t offset) {
  if (offset == 0) return w;
  auto backing = std::make_shared<Tensor>(Tensor::empty({w.numel() + 32}, DType::bf16));
  std::byte* start = static_cast<std::byte*>(backing->raw()) + offset;
  std::memcpy(start, w.raw(), w.nbytes());
  return Tensor::borrow(start, w.shape(), w.dtype(), backing);
}

void run(const GemmBenchArgs& args) {
  std::vector<int> thread_counts = args.threads;
  if (thread_counts.empty()) {
    thread_counts = {1};
    if (hardware_threads() > 1) thread_counts.push_back(hardware_threads());
  }
  for (const std::string& text : args.shapes) {
    const GemmShape s = parse_shape(text);
    const double flops = 2.0 * double(s.m) * double(s.n) * double(s.k);
    Tensor x = random_tensor({s.m, s.k}, 1), b = random_tensor({s.n}, 3);
    // Copies of the weight used in turn: past the last-level cache each product reads its weight from
    // memory, as a model's layers do (each layer's weight is read once per forward).
    std::vector<Tensor> ws, ws_bf16;
    for (int c = 0; c < args.weight_copies; ++c) {
      ws.push_back(random_tensor({s.n, s.k}, uint64_t(2 + c)));
      ws_bf16.push_back(off_the_line(ws.back().to(DType::bf16), args.weight_offset));
    }
    size_t turn = 0;
    auto next_w = [&]() -> const Tensor& { return ws[turn++ % ws.size()]; };
    auto next_w_bf16 = [&]() -> const Tensor& { return ws_bf16[turn++ % ws.size()]; };
    const Tensor& w = ws[0];
    Tensor y = Tensor::empty({s.m, s.n});
    auto wanted = [&](const std::string& op) {
      return args.ops.empty() || std::find(args.ops.begin(), args.ops.end(), op) != args.ops.end();
    };
    for (int threads : thread_counts) {
      ScopedComputeThreads budget(threads);
      auto report = [&](const std::string& library, const std::string& op, const Timing& t) {
        nlohmann::json j = line("gemm");
        j.update({{"library", library}, {"op", op}, {"m", s.m}, {"n", s.n}, {"k", s.k}, {"threads", threads},
                  {"repeats", args.repeats}, {"min_s", t.min_s}, {"median_s", t.median_s},
                  {"gflops_min", flops / t.min_s / 1e9}, {"gflops_median", flops / t.median_s / 1e9},
                  {"cpu_min_s", t.cpu_min_s}, {"cpu_median_s", t.cpu_median_s},
                  {"gflops_cpu_min", flops / t.cpu_min_s / 1e9}, {"gflops_cpu_median", flops / t.cpu_median_s / 1e9},
                  {"load_average_1min", load_average()}, {"samples_s", t.samples_s}});
        return j;
      };

      const Timing dnnl = measure([&] {
        kernels::gemm(false, true, s.m, s.n, s.k, 1.0f, x.data<float>(), s.k, next_w().data<float>(), s.k, 0.0f,
                      y.data<float>(), s.n);
      }, args.repeats);
      print(report("onednn", "sgemm", dnnl));

#ifdef CPDIT_HAVE_OPENBLAS
      openblas_set_num_threads(threads);
      if (wanted("openblas_sgemm")) {
      const Timing openblas = measure([&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(s.m), int(s.n), int(s.k), 1.0f, x.data<float>(),
                    int(s.k), w.data<float>(), int(s.k), 0.0f, y.data<float>(), int(s.n));
      }, args.repeats);
      print(report("openblas", "sgemm", openblas));
      }
#endif

      // Linear against the oneDNN sgemm it is built on: ratio = sgemm time / Linear time, in wall time
      // and in CPU time (the steadier of the two when the machine is oversubscribed).
      auto linear_line = [&](const std::string& op, const std::function<void()>& fn) {
        if (!wanted(op)) return;
        const Timing t = measure(fn, args.repeats);
        nlohmann::json j = report("cpdit", op, t);
        j.update({{"over_onednn_sgemm_min", dnnl.min_s / t.min_s},
                  {"over_onednn_sgemm_median", dnnl.median_s / t.median_s},
                  {"over_onednn_sgemm_cpu", dnnl.cpu_min_s / t.cpu_min_s}});
        print(j);
      };
      linear_line("linear_f32", [&] { kernels::linear_into(x, next_w(), {}, y); });
      linear_line("linear_f32_bias", [&] { kernels::linear_into(x, next_w(), b, y); });
      linear_line("gemm_then_bias_pass", [&] { gemm_then_bias_pass(x, next_w(), b, y); });
      // An FFN's hidden layer: the Linear with its GELU-tanh epilogue (the sgemm, then bias and GELU in
      // one pass) against the Linear with its bias and a GELU pass after it.
      linear_line("linear_f32_bias_gelu", [&] { y = kernels::linear(x, next_w(), b, kernels::Epilogue::gelu_tanh); });
      linear_line("linear_f32_bias_then_gelu_pass", [&] {
        kernels::linear_into(x, next_w(), b, y);
        kernels::bias_gelu_(y, {}, /*tanh_approx=*/true);
      });
      linear_line("linear_bf16_weights_bias", [&] { kernels::linear_into(x, next_w_bf16(), b, y); });
      // The bf16 products linear_bf16_compute chooses between (AMX first, where available; rows for m <= 4).
      if (kernels::amx_available()) {
        linear_line("linear_bf16_amx_bias",
                    [&] { kernels::linear_bf16_compute(x, next_w_bf16(), b, kernels::Bf16Matmul::amx); });
        // The FFN hidden layer under --dtype bf16: GELU on the tiles as they are stored.
        linear_line("linear_bf16_amx_bias_gelu", [&] {
          const ScopedMatmulPrecision reduced(MatmulPrecision::bf16);
          y = kernels::linear(x, next_w_bf16(), b, kernels::Epilogue::gelu_tanh);
        });
      }
      if (s.m <= 4 && kernels::kernel_isa() >= kernels::Isa::avx512_bf16)
        linear_line("linear_bf16_rows_bias",
                    [&] { kernels::linear_bf16_compute(x, next_w_bf16(), b, kernels::Bf16Matmul::rows); });
      linear_line("linear_bf16_onednn_bias",
                  [&] { kernels::linear_bf16_compute(x, next_w_bf16(), b, kernels::Bf16Matmul::onednn); });
      // GGUF blocks: decoded one tile at a time for the sgemm (exact products); under bf16 precision
      // (what --dtype q8_0 / q4_k runs) decoded to bf16 runs for the AMX tile product, and on CPUs
      // without AMX Q8_0 by AVX512-VNNI int8 dot products on activations quantised per 32 values.
      if (s.k % 256 == 0 && (args.ops.empty() || std::any_of(args.ops.begin(), args.ops.end(), [](const std::string& op) {
                                return op.find("_q") != std::string::npos;
                              }))) {
        const Weight w_q8 = kernels::quantise(w, "Q8_0"), w_q4k = kernels::quantise(w, "Q4_K");
        linear_line("linear_q8_0_decode_bias", [&] { kernels::linear_into(x, w_q8, b, y); });
        linear_line("linear_q4_k_decode_bias", [&] { kernels::linear_into(x, w_q4k, b, y); });
        const ScopedMatmulPrecision reduced(MatmulPrecision::bf16);
        if (kernels::amx_available()) {
          linear_line("linear_q8_0_amx_bias", [&] { kernels::linear_into(x, w_q8, b, y); });
          linear_line("linear_q4_k_amx_bias", [&] { kernels::linear_into(x, w_q4k, b, y); });
        }
        const kernels::ScopedKernelIsa no_amx(kernels::Isa::avx512_bf16);  // AMX runs at the amx level only
        linear_line("linear_q8_0_int8_vnni_bias", [&] { kernels::linear_into(x, w_q8, b, y); });
      }
    }
  }
}

void add_gemm_bench(CLI::App& parent) {
  auto args = std::make_shared<GemmBenchArgs>();
  CLI::App* cmd = parent.add_subcommand("gemm", "sgemm of each GEMM library and cpdit's Linear (f32, bf16)");
  cmd->add_option("--shape", args->shapes, "MxNxK shapes (default 4096x3072x3072; try also 2048x2048x2048)");
  cmd->add_option("--threads", args->threads, "thread counts (default 1 and all)");
  cmd->add_option("--repeats", args->repeats, "timed repeats after one warm-up (default 3)");
  cmd->add_option("--ops", args->ops, "only these Linear lines (e.g. linear_bf16_amx_bias; default all)");
  cmd->add_option("--weight-copies", args->weight_copies,
                  "distinct weights used in turn (default 1); enough that their bytes pass the last-level cache "
                  "make every product read its weight from memory, as a model's layers do")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--weight-offset", args->weight_offset,
                  "bf16 weights start this many bytes past a 64-byte line (default 0), as the tensors of a mapped "
                  "checkpoint may (safetensors aligns them to 8 bytes, GGUF to 32)")
      ->check(CLI::Validator(
          [](std::string& v) {
            char* end = nullptr;
            const long bytes = std::strtol(v.c_str(), &end, 10);
            const bool even_in_range = !v.empty() && *end == '\0' && bytes >= 0 && bytes <= 62 && bytes % 2 == 0;
            return even_in_range ? std::string() : "must be an even number of bytes from 0 to 62, got '" + v + "'";
          },
          "EVEN 0..62"));
  cmd->callback([args] { run(*args); });
}

const bool registered = app::register_bench("gemm", add_gemm_bench);

}  // namespace
}  // namespace cpdit::bench
