// What only the local engine can show from inside one process: failures reaching every rank in
// time, per-rank memory and thread budgets, and barrier semantics seen through shared memory.
#include <cpdit/comm/launch.hpp>
#include <cpdit/comm/local.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/core/tensor.hpp>
#include <cpdit/core/threads.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace cpdit::comm {
namespace {

using Seconds = std::chrono::duration<double>;

// Runs fn on n ranks; returns what each rank caught (empty when it finished cleanly) and what
// run_local rethrew. Ranks record their error, then rethrow it so the engine sees the failure.
struct Outcome {
  std::vector<std::string> rank_errors;
  std::string rethrown;
  double seconds = 0;
};

Outcome run_catching(int n, const std::function<void(Communicator&)>& fn, LocalOptions options = {}) {
  Outcome outcome;
  outcome.rank_errors.resize(n);
  std::mutex mutex;
  auto start = std::chrono::steady_clock::now();
  try {
    run_local(
        n,
        [&](Communicator& comm) {
          try {
            fn(comm);
          } catch (const std::exception& e) {
            std::lock_guard lock(mutex);
            outcome.rank_errors[comm.rank()] = e.what();
            throw;
          }
        },
        options);
  } catch (const std::exception& e) {
    outcome.rethrown = e.what();
  }
  outcome.seconds = Seconds(std::chrono::steady_clock::now() - start).count();
  return outcome;
}

// Rank 2 throws while the others wait in a collective: they all get an error naming rank 2 long
// before the (default, generous) timeout, and run_local rethrows rank 2's own error.
TEST(LocalFaults, ThrowMidCollectiveReachesEveryRank) {
  for (int n : {3, 5}) {
    Outcome o = run_catching(n, [](Communicator& comm) {
      std::vector<float> data(1000, 1.f), all(1000 * comm.size());
      comm.all_gather(data.data(), 4000, all.data());
      if (comm.rank() == 2) throw std::runtime_error("boom on purpose");
      comm.all_reduce(data.data(), data.size(), DType::f32, ReduceOp::sum);
    });
    EXPECT_EQ(o.rethrown, "boom on purpose");
    EXPECT_LT(o.seconds, 10.0);
    for (int r = 0; r < n; ++r) {
      if (r == 2) continue;
      EXPECT_NE(o.rank_errors[r].find("rank 2 failed: boom on purpose"), std::string::npos) << o.rank_errors[r];
      EXPECT_NE(o.rank_errors[r].find("all_reduce"), std::string::npos) << o.rank_errors[r];
    }
  }
}

TEST(LocalFaults, ThrowWakesPendingReceivesAndSubgroups) {
  Outcome o = run_catching(4, [](Communicator& comm) {
    auto pair = comm.split(comm.rank() / 2, 0);
    if (comm.rank() == 3) throw std::runtime_error("rank three gives up");
    if (comm.rank() == 0) {
      float x;
      comm.recv(&x, 4, 3, 0);  // never sent
    } else if (comm.rank() == 1) {
      float x;
      auto r = comm.irecv(&x, 4, 3, 0);
      r->wait();
    } else {
      pair->barrier();  // rank 2 waits for rank 3 in their pair
    }
  });
  EXPECT_EQ(o.rethrown, "rank three gives up");
  for (int r = 0; r < 3; ++r)
    EXPECT_NE(o.rank_errors[r].find("rank 3 failed: rank three gives up"), std::string::npos) << o.rank_errors[r];
  EXPECT_LT(o.seconds, 10.0);
}

// A rank that returns while a peer still expects something from it is reported, not waited for.
TEST(LocalFaults, PeerThatReturnedIsReported) {
  Outcome o = run_catching(3, [](Communicator& comm) {
    if (comm.rank() == 1) return;
    if (comm.rank() == 0) {
      float x;
      comm.recv(&x, 4, 1, 0);
    } else {
      comm.barrier();
    }
  });
  EXPECT_NE(o.rethrown.find("rank 1 returned from its function without taking part"), std::string::npos)
      << o.rethrown;
  EXPECT_LT(o.seconds, 10.0);
}

TEST(LocalFaults, TimeoutNamesOperationPeerAndRank) {
  LocalOptions options;
  options.comm.timeout = std::chrono::milliseconds(100);
  try {
    run_local(
        2,
        [](Communicator& comm) {
          if (comm.rank() == 1) {
            std::this_thread::sleep_for(std::chrono::milliseconds(400));
            return;
          }
          comm.barrier();
        },
        options);
    FAIL() << "expected a timeout";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::timeout);
    EXPECT_NE(std::string(e.what()).find("rank 0: barrier on a 2-rank communicator timed out after 0.1 s"),
              std::string::npos)
        << e.what();
  }
}

TEST(LocalFaults, MismatchedCollectivesAreRefused) {
  Outcome o = run_catching(2, [](Communicator& comm) {
    if (comm.rank() == 0) {
      comm.barrier();
    } else {
      int x = 0;
      comm.broadcast(&x, sizeof x, 0);
    }
  });
  EXPECT_NE(o.rethrown.find("every rank must call the same collectives in the same order"), std::string::npos)
      << o.rethrown;
}

TEST(LocalFaults, DestroyedRequestIsWithdrawn) {
  run_local(2, [](Communicator& comm) {
    float y = 0;
    if (comm.rank() == 0) {
      comm.irecv(&y, 4, 1, 0).reset();  // withdrawn: must not consume rank 1's message
      comm.barrier();
      comm.recv(&y, 4, 1, 0);
      EXPECT_EQ(y, 5.f);
    } else {
      float x = 5;
      comm.barrier();
      comm.send(&x, 4, 0, 0);
    }
  });
}

// Each rank has its own memory counter and compute-thread budget.
TEST(LocalRun, PerRankMemoryAndThreads) {
  LocalOptions options;
  options.threads_per_rank = 3;
  std::vector<int> threads(4);
  auto stats = run_local(
      4,
      [&](Communicator& comm) {
        threads[comm.rank()] = compute_threads();
        Tensor t = Tensor::zeros({int64_t(comm.rank() + 1) << 18});  // (rank + 1) MiB of f32
        comm.barrier();
      },
      options);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(threads[r], 3);
    EXPECT_GE(stats[r].peak_bytes, int64_t(r + 1) << 20);
    EXPECT_LT(stats[r].peak_bytes, int64_t(r + 2) << 20);  // no other rank's bytes
    EXPECT_EQ(stats[r].final_bytes, 0);
  }
  std::vector<int> defaults(2);
  run_local(2, [&](Communicator& comm) { defaults[comm.rank()] = compute_threads(); });
  EXPECT_EQ(defaults[0], std::max(1, hardware_threads() / 2));
}

// Nobody leaves a barrier before everybody entered it.
TEST(LocalRun, BarrierSeparatesPhases) {
  std::atomic<int> entered{0};
  run_local(5, [&](Communicator& comm) {
    for (int round = 1; round <= 50; ++round) {
      entered.fetch_add(1);
      comm.barrier();
      EXPECT_GE(entered.load(), 5 * round);
      comm.barrier();
    }
  });
}

TEST(LocalRun, RejectsNoRanks) {
  EXPECT_THROW(run_local(0, [](Communicator&) {}), Error);
}

TEST(Selection, ErrorsNameTheirRankOnce) {
  EXPECT_EQ(rank_message(2, "recv from 1 timed out"), "rank 2: recv from 1 timed out");
  EXPECT_EQ(rank_message(2, "rank 2: recv from 1 timed out"), "rank 2: recv from 1 timed out");
  EXPECT_EQ(rank_message(2, "rank 1 failed: boom"), "rank 2: rank 1 failed: boom");
}

TEST(Selection, DefaultTimeoutFollowsEnvironment) {
  // The variable is process-wide: whatever the caller set is put back at the end.
  const char* outer = std::getenv("CPDIT_COMM_TIMEOUT_S");
  const std::string saved = outer ? outer : "";
  ::setenv("CPDIT_COMM_TIMEOUT_S", "2.5", 1);
  EXPECT_EQ(default_timeout(), std::chrono::milliseconds(2500));
  ::setenv("CPDIT_COMM_TIMEOUT_S", "0.001", 1);
  EXPECT_EQ(default_timeout(), std::chrono::milliseconds(1));
  // Not a number, not positive, below the millisecond deadlines count in (0.0001 was 0 s: no wait), or
  // so large that a deadline computed from it would overflow.
  for (const char* bad : {"soon", "0", "-3", "nan", "inf", "0.0001", "1e300"}) {
    ::setenv("CPDIT_COMM_TIMEOUT_S", bad, 1);
    try {
      default_timeout();
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("CPDIT_COMM_TIMEOUT_S must be a number of seconds from 0.001 to"),
                std::string::npos) << e.what();
    }
  }
  ::unsetenv("CPDIT_COMM_TIMEOUT_S");
  EXPECT_EQ(default_timeout(), std::chrono::seconds(300));
  if (outer) ::setenv("CPDIT_COMM_TIMEOUT_S", saved.c_str(), 1);
}

TEST(Selection, RunsLocallyWithoutLauncher) {
  if (launched_by_mpi()) GTEST_SKIP() << "running under an MPI launcher";
  std::atomic<int> ranks{0};
  run_ranks(3, [&](Communicator& comm) {
    EXPECT_EQ(comm.engine(), "local");
    ranks.fetch_add(1);
  });
  EXPECT_EQ(ranks.load(), 3);
}

}  // namespace
}  // namespace cpdit::comm
