// Linear with bf16 arithmetic: x rounded to bf16, bf16 products accumulated in f32, bias fused. For a
// few tokens by dot products over the weight's rows (linear_bf16_rows.cpp), else on AMX tiles
// (linear_amx.cpp) where the CPU and Linux allow, else through oneDNN's bf16 matmul: the C
// API of oneDNN 2.6 has no bf16 GEMM, so this builds matmul primitives and caches them per shape.
// oneDNN has no bf16 matmul on a CPU without AVX-512 (AVX2 alone); there the same arithmetic runs
// through its f32 sgemm on widened panels of the weight.
#include "kernels/cpu/linear_args.hpp"
#include "kernels/cpu/dnnl_engine.hpp"
#include "kernels/cpu/signals_held.hpp"
#include "kernels/cpu/isa_target.hpp"

#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/cpu.hpp>

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>

namespace cpdit::kernels {

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

struct Matmul {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul primitive;
};

// Building a primitive costs far more than a small matmul, and the models repeat a few shapes.
// The scratchpad is the caller's (user mode), so one primitive serves concurrent ranks.
std::shared_ptr<const Matmul> matmul_for(int64_t m, int64_t n, int64_t k, bool with_bias) {
  using Key = std::tuple<int64_t, int64_t, int64_t, bool>;
  static std::mutex mutex;
  static std::map<Key, std::shared_ptr<const Matmul>> cache;
  std::lock_guard lock(mutex);
  auto& slot = cache[Key{m, n, k, with_bias}];
  if (!slot) {
    dnnl::memory::desc src({m, k}, dt::bf16, tag::ab);
    dnnl::memory::desc weights({k, n}, dt::bf16, tag::ba);  // w is (n, k) row-major: k x n, transposed
    dnnl::memory::desc bias({1, n}, dt::f32, tag::ab);
    dnnl::memory::desc dst({m, n}, dt::f32, tag::ab);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    auto desc = with_bias ? dnnl::matmul::desc(src, weights, bias, dst) : dnnl::matmul::desc(src, weights, dst);
    dnnl::matmul::primitive_desc pd(desc, attr, cpu_engine());
    slot = std::make_shared<const Matmul>(Matmul{pd, dnnl::matmul(pd)});
  }
  return slot;
}

Tensor round_to_bf16(const Tensor& x) {
  Tensor out = Tensor::empty(x.shape(), DType::bf16);
  const float* src = x.data<float>();
  bf16* dst = out.data<bf16>();
  const int64_t n = x.numel();
#pragma omp parallel for simd num_threads(compute_threads()) if (n >= detail::kParallelMin)
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
  return out;
}

// Whether oneDNN builds bf16 matmuls on this CPU: asked once, with a small shape.
bool onednn_has_bf16() {
  static const bool has = [] {
    try {
      matmul_for(16, 16, 16, false);
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return has;
}

// The bf16 product without a bf16 kernel: x's bf16 values and the weight's widen to f32 exactly, and the
// product of two bf16 values is exact in f32, so f32 sgemm sums the same products in f32 as a bf16
// kernel does (in its own order). The weight is widened a panel of rows at a time, never whole.
void bf16_panels_into(const detail::LinearArgs& a, const Tensor& x_bf16, float* y) {
  constexpr int64_t kPanelRows = 256;
  const Tensor x = x_bf16.to(DType::f32);
  const bf16* w = a.weight.data<bf16>();
  Tensor panel = Tensor::empty({std::min(kPanelRows, a.n), a.k});
  float* p = panel.data<float>();
  for (int64_t row = 0; row < a.n; row += kPanelRows) {
    const int64_t rows = std::min(kPanelRows, a.n - row), count = rows * a.k;
#pragma omp parallel for simd num_threads(compute_threads()) if (count >= detail::kParallelMin)
    for (int64_t i = 0; i < count; ++i) p[i] = bf16_to_f32(w[row * a.k + i]);
    gemm(false, true, a.m, rows, a.k, 1.0f, x.data<float>(), a.k, p, a.k, 0.0f, y + row, a.n);
  }
  if (a.bias.defined()) {
    const float* b = a.bias.data<float>();
#pragma omp parallel for num_threads(compute_threads()) if (a.m * a.n >= detail::kParallelMin)
    for (int64_t t = 0; t < a.m; ++t)
      for (int64_t c = 0; c < a.n; ++c) y[t * a.n + c] += b[c];
  }
}

}  // namespace

namespace detail {

void bf16_matmul_into(const LinearArgs& a, Tensor& out, Bf16Matmul how) {
  const bool few_tokens = a.weight.defined() && a.m <= kBf16RowsMaxTokens && kernel_isa() >= Isa::avx512_bf16;
  if (how == Bf16Matmul::rows || (how == Bf16Matmul::fastest && few_tokens)) return bf16_rows_into(a, out.data<float>());
  if (how == Bf16Matmul::amx || (how == Bf16Matmul::fastest && amx_linear_available()))
    return amx_linear_into(a, out.data<float>());
  if (a.m == 0 || a.n == 0) return;
  Tensor x_bf16 = round_to_bf16(a.x);
  if (!onednn_has_bf16()) {
    bf16_panels_into(a, x_bf16, out.data<float>());
    return apply_epilogue(a, out.data<float>());
  }
  try {
    auto mm = matmul_for(a.m, a.n, a.k, a.bias.defined());
    const dnnl::engine& engine = cpu_engine();
    thread_local dnnl::stream stream(engine);
    Tensor scratch = Tensor::empty({int64_t(mm->pd.scratchpad_desc().get_size())}, DType::boolean);
    // oneDNN takes non-const handles; it only reads src, weights and bias.
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, dnnl::memory(mm->pd.src_desc(), engine, x_bf16.raw())},
        {DNNL_ARG_WEIGHTS, dnnl::memory(mm->pd.weights_desc(), engine, a.weight.raw())},
        {DNNL_ARG_DST, dnnl::memory(mm->pd.dst_desc(), engine, out.raw())},
        {DNNL_ARG_SCRATCHPAD, dnnl::memory(mm->pd.scratchpad_desc(), engine, scratch.raw())}};
    if (a.bias.defined()) args.emplace(DNNL_ARG_BIAS, dnnl::memory(mm->pd.bias_desc(), engine, a.bias.raw()));
    {
      const detail::SignalsHeld held;  // signals_held.hpp: oneDNN may run its JIT GEMM kernels here
      mm->primitive.execute(stream, args);
      stream.wait();
    }
    apply_epilogue(a, out.data<float>());
  } catch (const dnnl::error& e) {
    fail(ErrorKind::unsupported, "linear_bf16_compute: oneDNN bf16 matmul failed for (", a.m, " x ", a.k, ") x (",
         a.k, " x ", a.n, "): ", e.what(), " (use linear)");
  }
}

}  // namespace detail

bool amx_available() { return detail::amx_linear_available(); }

Tensor linear_bf16_compute(const Tensor& x, const Weight& weight, const Tensor& bias, Bf16Matmul how) {
  const detail::LinearArgs a = detail::linear_args(x, weight, bias, "linear_bf16_compute");
  CPDIT_CHECK(a.weight.dtype() == DType::bf16, invalid_argument, "linear_bf16_compute: weight must be bf16, got ",
              weight.describe(), " (convert it once with .to(DType::bf16), or use linear)");
  Tensor out = Tensor::empty(a.out_shape);
  detail::bf16_matmul_into(a, out, how);
  return out;
}

}  // namespace cpdit::kernels
