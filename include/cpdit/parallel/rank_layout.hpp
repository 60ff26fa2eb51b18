#pragma once
// How a run asks for its ranks (--ring, --ulysses, --cfg-parallel, --rotate, --backend, --ranks,
// --threads, or the Python and server fields of the same names) and how that resolves into a number of
// ranks, a (cfg, ring, Ulysses) configuration and a compute-thread budget per rank.
#include <cpdit/parallel/config.hpp>

#include <cstdint>
#include <string>

namespace cpdit::parallel {

struct RankRequest {
  int ring = 0, ulysses = 0;  // 0: not given
  int cfg = 1;                // CFG-parallel rank groups
  std::string rotate = "p2p";
  std::string backend;  // empty: $CPDIT_ATTENTION_BACKEND, else flash
  int ranks = 0;        // 0: not given
  int threads = 0;      // per rank; 0: cores / ranks
};

struct RankLayout {
  int ranks = 1;  // local threads, or the MPI world size under mpirun
  bool mpi = false;
  int threads_per_rank = 1;
  ContextParallelConfig config;
};

// Refuses a local rank count beyond what this machine can usefully run as threads.
void check_local_ranks(int ranks);

// Under mpirun the world size is the rank count. Otherwise `ranks`, else cfg x ring x ulysses, else
// `default_ranks` (rounded down to a multiple of cfg). Each CFG group gets ranks / cfg; degrees not
// given are chosen for that count: Ulysses as large as divides both it and `heads` (all-to-all on
// the fastest links), the ring takes the rest. Contradictions (--ranks 3 with --ring 2) are refused
// with a message naming the fix.
RankLayout resolve_layout(const RankRequest& request, int64_t heads, int default_ranks);

// Empty when the local ranks' compute threads fit in `cores`; otherwise a warning that says so: ranks
// that share cores wait on each other at every attention call, slower than fewer ranks would run.
std::string oversubscription_warning(const RankLayout& layout, int cores);

// "4 local ranks (ring 2 x ulysses 2, p2p), 1 thread each"; with cfg 2: "(cfg 2 x ring 2 x ...".
std::string describe(const RankLayout& layout);

}  // namespace cpdit::parallel
