#pragma once
// Shared by every benchmark: repeat a function, keep min and median, print JSON lines that record
// the environment the numbers were taken in.
#include <cpdit/core/tensor.hpp>

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

namespace cpdit::bench {

struct Timing {
  double min_s = 0;
  double median_s = 0;
  std::vector<double> samples_s;
  // Process CPU time (summed over threads) of the cheapest repeat. On a shared, oversubscribed
  // machine wall time includes time spent descheduled; one-thread CPU time does not.
  double cpu_min_s = 0;
  double cpu_median_s = 0;
};

// CPU seconds used so far by the process (summed over its threads), or by the calling thread.
double process_cpu_seconds();
double thread_cpu_seconds();

// The process's resident memory (Linux's /proc/self/status; ranks as threads share it): now, and the
// most since reset_peak_resident, or since the process started where the kernel refuses the reset
// (then it returns false).
int64_t resident_bytes();
int64_t peak_resident_bytes();
bool reset_peak_resident();

// Runs fn once to warm up (caches, allocator, page faults), then `repeats` timed runs.
Timing measure(const std::function<void()>& fn, int repeats);

// Random N(0, 1) inputs, the same for a seed wherever they are made (pipeline::randn's stream).
Tensor random_tensor(const Shape& shape, uint64_t seed);

// Fields every line carries: benchmark name, OPENBLAS_CORETYPE (or "unset"), hardware threads, and the
// kernels' instruction-set level (CPDIT_KERNEL_ISA, kernels/isa.hpp).
nlohmann::json line(const std::string& benchmark);

void print(const nlohmann::json& j);  // one line on stdout, flushed

}  // namespace cpdit::bench
