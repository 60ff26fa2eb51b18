#pragma once
// The `local` engine: N ranks as threads of one process (the default without an MPI launcher, and
// the engine of the tests). Messages are copied once, straight from the sender's buffer into the
// receiver's; collectives meet at a shared rendezvous.
#include <cpdit/comm/communicator.hpp>

#include <cstdint>
#include <functional>
#include <vector>

namespace cpdit::comm {

struct LocalOptions {
  // Compute threads of each rank (ScopedComputeThreads on the rank thread); 0 means
  // max(1, hardware_threads() / n).
  int threads_per_rank = 0;
  CommOptions comm;
};

// What each rank used, read after the run.
struct RankStats {
  int64_t peak_bytes = 0;   // high-water mark of the rank's MemoryCounter (tensor bytes)
  int64_t final_bytes = 0;  // tensor bytes still charged to the rank when fn returned
  double seconds = 0;       // wall time of fn on the rank
};

// Runs fn(comm) on n threads, one per rank, and joins them. Each rank thread gets its own
// MemoryCounter (ScopedMemoryCounter) and compute-thread budget. When fn throws on one rank, every
// rank's pending and later operations fail, all threads end, and run_local rethrows the error of
// the rank that failed first. Returns per-rank stats (indexed by rank).
std::vector<RankStats> run_local(int n, const std::function<void(Communicator&)>& fn,
                                 const LocalOptions& options = {});

}  // namespace cpdit::comm
