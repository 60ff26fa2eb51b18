#include "local_communicator.hpp"

#include <cpdit/comm/local.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/core/memory.hpp>
#include <cpdit/core/threads.hpp>

#include <algorithm>
#include <numeric>
#include <system_error>
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
  threads.reserve(size_t(n));
  for (int rank = 0; rank < n; ++rank) {
    try {
      threads.emplace_back(run_rank, rank);
    } catch (const std::system_error& e) {
      // The ranks already running would wait for this one until the timeout: fail the world so they
      // stop at their next communication, and join them before reporting.
      std::lock_guard lock(world->mutex);
      world->record_failure(rank, std::make_exception_ptr(Error(
          ErrorKind::invalid_argument, detail::concat("cannot start rank ", rank, " of ", n, " (a thread): ",
                                                      e.what(), "; run fewer ranks"))));
      break;
    }
  }
  for (auto& t : threads) t.join();
  if (world->first_error()) std::rethrow_exception(world->first_error());
  return stats;
}

}  // namespace cpdit::comm
