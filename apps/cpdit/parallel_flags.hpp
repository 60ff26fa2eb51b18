#pragma once
// The context-parallel options every command that runs a model or attention shares
// (--ring, --ulysses, --rotate, --backend, --ranks, --threads), and how they resolve into a number
// of ranks, a (ring, Ulysses) configuration and a compute-thread budget per rank.
#include <CLI/CLI.hpp>
#include <cpdit/parallel/config.hpp>

#include <string>

namespace cpdit::app {

struct ParallelFlags {
  int ring = 0, ulysses = 0;  // 0: not given
  int cfg = 1;                // CFG-parallel rank groups (add_cfg_flag; commands without guidance keep 1)
  std::string rotate = "p2p";
  std::string backend;  // empty: $CPDIT_ATTENTION_BACKEND, else flash
  int ranks = 0;        // 0: not given
  int threads = 0;      // per rank; 0: cores / ranks
};

void add_parallel_flags(CLI::App& cmd, ParallelFlags& flags);
// --cfg, for commands whose pipelines run classifier-free guidance.
void add_cfg_flag(CLI::App& cmd, ParallelFlags& flags);

struct RankLayout {
  int ranks = 1;  // local threads, or the MPI world size under mpirun
  bool mpi = false;
  int threads_per_rank = 1;
  parallel::ContextParallelConfig config;
};

// Refuses a local rank count beyond what this machine can usefully run as threads.
void check_local_ranks(int ranks);

// Under mpirun the world size is the rank count. Otherwise --ranks, else cfg x ring x ulysses, else
// `default_ranks` (rounded down to a multiple of cfg). Each CFG group gets ranks / cfg; degrees not
// given are chosen for that count: Ulysses as large as divides both it and `heads` (all-to-all on
// the fastest links), the ring takes the rest. Contradictions (--ranks 3 with --ring 2) are refused
// with a message naming the fix.
RankLayout resolve_layout(const ParallelFlags& flags, int64_t heads, int default_ranks);

// "4 local ranks (ring 2 x ulysses 2, p2p), 1 thread each"; with cfg 2: "(cfg 2 x ring 2 x ...".
std::string describe(const RankLayout& layout);

}  // namespace cpdit::app
