#pragma once
// The one oneDNN CPU engine that every kernel calling oneDNN primitives (convolution, bf16 matmul)
// builds them on: an engine is costly to make and holds no per-call state.
#include <oneapi/dnnl/dnnl.hpp>

namespace cpdit::kernels {

inline const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

}  // namespace cpdit::kernels
