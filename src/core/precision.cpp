#include <cpdit/core/precision.hpp>

#include <atomic>

namespace cpdit {

namespace {
std::atomic<MatmulPrecision> process_precision{MatmulPrecision::exact_f32};
}

MatmulPrecision matmul_precision() { return process_precision.load(std::memory_order_relaxed); }

void set_matmul_precision(MatmulPrecision p) { process_precision.store(p, std::memory_order_relaxed); }

ScopedMatmulPrecision::ScopedMatmulPrecision(MatmulPrecision p) : previous_(matmul_precision()) {
  set_matmul_precision(p);
}

ScopedMatmulPrecision::~ScopedMatmulPrecision() { set_matmul_precision(previous_); }

}  // namespace cpdit
