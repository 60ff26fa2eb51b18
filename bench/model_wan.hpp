#pragma once
// `cpdit bench model --model wan` (bench/model.cpp parses the flags and calls this).
#include <cpdit/nn/load.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace cpdit::bench {

struct WanBenchArgs {
  bool quick = false;           // 1950 tokens, Ulysses only
  std::string dtype = "f32";    // GEMM weights: f32 | bf16
  std::vector<int64_t> tokens;  // video tokens; default 1950 and 7800 (1950 with quick)
  int repeats = 3;
};

// Latency of one Wan 2.1 1.3B block (1536 = 12 heads x 128, FFN 8960, 512 text tokens) on 1 rank and
// on 2 ranks (one compute thread each; Ulysses, and ring unless quick), with each rank's peak tensor
// memory. Prints one JSON line per layout.
void run_wan_model_bench(const WanBenchArgs& args);

}  // namespace cpdit::bench
