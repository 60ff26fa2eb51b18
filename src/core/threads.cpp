#include <cpdit/core/error.hpp>
#include <cpdit/core/threads.hpp>

#include <omp.h>

#include <thread>

namespace cpdit {

namespace {
thread_local int thread_budget = 0;  // 0: not set on this thread
}

int compute_threads() { return thread_budget > 0 ? thread_budget : omp_get_max_threads(); }

void set_compute_threads(int n) {
  CPDIT_CHECK(n >= 1, invalid_argument, "compute threads must be at least 1, got ", n);
  thread_budget = n;
  omp_set_num_threads(n);  // the calling thread's ICV: libraries using OpenMP (oneDNN) follow it
}

int hardware_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : int(n);
}

ScopedComputeThreads::ScopedComputeThreads(int n) : previous_(thread_budget) { set_compute_threads(n); }

ScopedComputeThreads::~ScopedComputeThreads() {
  thread_budget = previous_;
  omp_set_num_threads(compute_threads());
}

}  // namespace cpdit
