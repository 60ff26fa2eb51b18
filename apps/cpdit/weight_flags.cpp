#include "weight_flags.hpp"

#include <cpdit/core/weight.hpp>

#include <cstdio>

namespace cpdit::app {

void add_dtype_flag(CLI::App& cmd, std::string& dtype) {
  cmd.add_option("--dtype", dtype,
                 "weights in memory: auto (as the checkpoint stores them; bf16 stays bf16, mapped, not copied), "
                 "f32 (widened once, shared by the local ranks), bf16 (the linear layers' weights narrowed once), "
                 "or q8_0 / q4_k (dense linear weights encoded once in that GGUF block format); "
                 "auto and f32 compute in f32 (bf16 weights widened exactly per GEMM, GGUF blocks decoded exactly); "
                 "bf16 computes the linear layers in bf16 with f32 accumulation, Q8_0 and Q4_0 blocks (a GGUF's, or "
                 "q8_0's) by int8 dot products on activations quantised per 32 values, other blocks decoded per tile "
                 "for the f32 GEMM; under bf16, q8_0 and q4_k attention's tile products are bf16 and norms, softmax "
                 "statistics and residuals f32")
      ->capture_default_str();
}

int64_t resident_weight_bytes() { return weight_memory_counter().peak(); }

void print_weights_line(int64_t bytes, const std::string& dtype) {
  std::printf("weights      %.2f MiB resident in this process (%lld bytes), --dtype %s\n", double(bytes) / (1 << 20),
              (long long)bytes, dtype.c_str());
}

}  // namespace cpdit::app
