#include <cpdit/core/error.hpp>
#include <cpdit/core/threads.hpp>

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include <sched.h>

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

namespace {

// The CPU quota of this process's cgroup in whole cores (cgroup v2 cpu.max, else v1 cfs quota), or 0
// when there is none.
int cgroup_cores() {
  int64_t quota = 0, period = 0;
  std::ifstream v2("/sys/fs/cgroup/cpu.max");  // "max 100000" or "200000 100000"
  std::string quota_text;
  if (v2 >> quota_text >> period) {
    if (quota_text == "max" || period <= 0) return 0;
    quota = std::atoll(quota_text.c_str());
  } else {
    std::ifstream q("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), p("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
    if (!(q >> quota) || !(p >> period) || quota <= 0 || period <= 0) return 0;
  }
  return quota <= 0 ? 0 : int(std::max<int64_t>(1, (quota + period - 1) / period));
}

}  // namespace

int hardware_threads() {
  // The cores this process may run on (taskset, mpirun's binding), not the machine's.
  cpu_set_t set;
  CPU_ZERO(&set);
  int n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
  if (n <= 0) n = int(std::thread::hardware_concurrency());
  if (const int quota = cgroup_cores(); quota > 0) n = std::min(n, quota);
  return std::max(n, 1);
}

ScopedComputeThreads::ScopedComputeThreads(int n) : previous_(thread_budget) { set_compute_threads(n); }

ScopedComputeThreads::~ScopedComputeThreads() {
  thread_budget = previous_;
  omp_set_num_threads(compute_threads());
}

}  // namespace cpdit
