#include "local_communicator.hpp"

#include <cpdit/comm/local.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/core/memory.hpp>
#include <cpdit/core/threads.hpp>

#include <algorithm>
#include <numeric>
#include <thread>

namespace cpdit::comm {

std::vector<RankStats> run_local(int n, const std::function<void(Communicator&)>& fn, const LocalOptions& options) {
  CPDIT_CHECK(n >= 1, invalid_argument, "run_local needs at least 1 rank, got ", n);
  CPDIT_CHECK(options.threads_per_rank >= 0, invalid_argument, "threads_per_rank must be >= 0, got ",
              options.threads_per_rank);
  const int threads_per_rank = options.threads_per_rank > 0 ? options.threads_per_rank
                                                            : std::max(1, hardware_threads() / n);
  auto world = std::make_shared<local::World>(n);
  std::vector<int> ranks(n);
  std::iota(ranks.begin(), ranks.end(), 0);
  auto group = std::make_shared<local::Group>(ranks);

  std::vector<MemoryCounter> counters(n);
  std::vector<RankStats> stats(n);
  auto run_rank = [&](int rank) {
    ScopedMemoryCounter counted(counters[rank]);
    ScopedComputeThreads budget(threads_per_rank);
    auto start = local::Clock::now();
    std::exception_ptr error;
    try {
      local::LocalCommunicator comm(world, group, rank, options.comm);
      fn(comm);
    } catch (...) {
      error = std::current_exception();
    }
    stats[rank] = RankStats{counters[rank].peak(), counters[rank].current(),
                            std::chrono::duration<double>(local::Clock::now() - start).count()};
    std::lock_guard lock(world->mutex);
    if (error)
      world->record_failure(rank, error);
    else
      world->finish(rank);
  };

  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) threads.emplace_back(run_rank, rank);
  for (auto& t : threads) t.join();
  if (world->first_error()) std::rethrow_exception(world->first_error());
  return stats;
}

}  // namespace cpdit::comm
