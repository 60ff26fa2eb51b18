#include "weight_flags.hpp"

#include <cpdit/core/weight.hpp>

#include <cstdio>

namespace cpdit::app {

void add_dtype_flag(CLI::App& cmd, std::string& dtype) {
  cmd.add_option("--dtype", dtype,
                 "weights in memory: auto (as the checkpoint stores them; bf16 stays bf16, mapped, not copied), "
                 "f32 (widened once, shared by the local ranks) or bf16 (the linear layers' weights narrowed once); "
                 "bf16 weights are widened exactly to f32 for each GEMM")
      ->capture_default_str();
}

int64_t resident_weight_bytes() { return weight_memory_counter().peak(); }

void print_weights_line(int64_t bytes, const std::string& dtype) {
  std::printf("weights      %.2f MiB resident in this process (%lld bytes), --dtype %s\n", double(bytes) / (1 << 20),
              (long long)bytes, dtype.c_str());
}

}  // namespace cpdit::app
