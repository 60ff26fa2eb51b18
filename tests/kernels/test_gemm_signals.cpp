// oneDNN 2.x's JIT f32 GEMM kernels point the stack register into a heap workspace while they run, so
// a signal handled on a thread inside one has its frame written into the heap (oneDNN issue 4845):
// Ctrl-C under Python, or the command line's clean-up handler, corrupted the heap now and then. The
// kernels hold asynchronous signals off while oneDNN runs; a stream of signals during many GEMMs must
// still be delivered, and leave the results and the heap intact.
#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/cpu.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>
#include <vector>

#include <pthread.h>
#include <unistd.h>

using namespace cpdit;

namespace {

std::atomic<int> delivered{0};
extern "C" void count_signal(int) { delivered.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

TEST(GemmSignals, SignalsDuringGemmsArriveAfterThemAndCorruptNothing) {
  struct sigaction handler {}, previous {};
  handler.sa_handler = count_signal;
  handler.sa_flags = SA_RESTART;
  sigemptyset(&handler.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR1, &handler, &previous), 0);

  // 384 x 384 x 384 runs oneDNN's JIT kernels (not its small-matrix paths), on every compute thread.
  const int64_t n = 384;
  std::vector<float> a(size_t(n * n)), b(size_t(n * n)), want(size_t(n * n)), got(size_t(n * n));
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = float(int(i % 17) - 8) / 8.0f;
    b[i] = float(int(i % 13) - 6) / 6.0f;
  }
  kernels::gemm(false, true, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, want.data(), n);

  // Process-directed, as kill and Ctrl-C are: the kernel picks any thread that does not hold them off.
  std::atomic<bool> done{false};
  std::thread sender([&] {
    while (!done.load()) {
      kill(getpid(), SIGUSR1);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  int mismatches = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  int runs = 0;
  while (std::chrono::steady_clock::now() < end) {
    kernels::gemm(false, true, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, got.data(), n);
    mismatches += std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) != 0;
    ++runs;
    // Heap traffic between the GEMMs, so that a corrupted chunk is met (glibc aborts on it).
    std::vector<std::vector<char>> churn;
    for (int i = 0; i < 64; ++i) churn.emplace_back(size_t(64 + 97 * i));
  }
  done = true;
  sender.join();
  sigaction(SIGUSR1, &previous, nullptr);

  EXPECT_EQ(mismatches, 0) << "of " << runs << " GEMMs";
  EXPECT_GT(delivered.load(), 100) << "the signals sent during " << runs << " GEMMs were not delivered";
}
