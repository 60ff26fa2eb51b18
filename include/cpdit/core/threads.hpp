#pragma once
// Compute-thread budget of the calling rank. Ranks may be threads of one process, so the budget is
// per thread: kernels open their OpenMP teams with num_threads(compute_threads()).
namespace cpdit {

int compute_threads();          // default: the OpenMP default of the process
void set_compute_threads(int n);  // n >= 1; also sets this thread's OpenMP nthreads ICV
int hardware_threads();        // the cores this process may use: its CPU affinity and cgroup quota

class ScopedComputeThreads {
 public:
  explicit ScopedComputeThreads(int n);
  ~ScopedComputeThreads();
  ScopedComputeThreads(const ScopedComputeThreads&) = delete;
  ScopedComputeThreads& operator=(const ScopedComputeThreads&) = delete;

 private:
  int previous_;
};

}  // namespace cpdit
