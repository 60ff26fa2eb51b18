#include "kernels/cpu/bf16_matmul.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/core/tensor.hpp>

#include <oneapi/dnnl/dnnl.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <tuple>

namespace cpdit::kernels::detail {

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

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

}  // namespace

void bf16_matmul(int64_t m, int64_t n, int64_t k, const bf16* x, const bf16* w, const float* bias, float* y) {
  if (m == 0 || n == 0) return;
  try {
    auto mm = matmul_for(m, n, k, bias != nullptr);
    const dnnl::engine& engine = cpu_engine();
    thread_local dnnl::stream stream(engine);
    // oneDNN takes non-const handles; it only reads src, weights and bias.
    dnnl::memory src(mm->pd.src_desc(), engine, const_cast<bf16*>(x));
    dnnl::memory weights(mm->pd.weights_desc(), engine, const_cast<bf16*>(w));
    dnnl::memory dst(mm->pd.dst_desc(), engine, y);
    Tensor scratch = Tensor::empty({int64_t(mm->pd.scratchpad_desc().get_size())}, DType::boolean);
    dnnl::memory scratchpad(mm->pd.scratchpad_desc(), engine, scratch.raw());
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCRATCHPAD, scratchpad}};
    if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(mm->pd.bias_desc(), engine, const_cast<float*>(bias)));
    mm->primitive.execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& e) {
    fail(ErrorKind::unsupported, "linear: oneDNN bf16 matmul failed for (", m, " x ", k, ") x (", k, " x ", n,
         "): ", e.what(), " (use f32 weights)");
  }
}

}  // namespace cpdit::kernels::detail
