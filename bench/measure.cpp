#include "measure.hpp"

#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/isa.hpp>
#include <cpdit/pipeline/random.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>

namespace cpdit::bench {

namespace {
double cpu_seconds(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}
}  // namespace

namespace {
// A "VmRSS:"-style field of /proc/self/status, in bytes (the file gives KiB); 0 where it is missing.
int64_t status_bytes(const std::string& field) {
  std::ifstream status("/proc/self/status");
  int64_t kib = 0;
  for (std::string key; status >> key;)
    if (key == field && status >> kib) return kib * 1024;
  return 0;
}
}  // namespace

int64_t resident_bytes() { return status_bytes("VmRSS:"); }
int64_t peak_resident_bytes() { return status_bytes("VmHWM:"); }

bool reset_peak_resident() {
  std::ofstream refs("/proc/self/clear_refs");
  refs << "5";  // sets the peak resident set (VmHWM) to the current one
  refs.flush();
  return bool(refs);
}

double process_cpu_seconds() { return cpu_seconds(CLOCK_PROCESS_CPUTIME_ID); }
double thread_cpu_seconds() { return cpu_seconds(CLOCK_THREAD_CPUTIME_ID); }

Timing measure(const std::function<void()>& fn, int repeats) {
  fn();
  Timing t;
  std::vector<double> cpu_samples;
  for (int i = 0; i < std::max(repeats, 1); ++i) {
    const double cpu_start = process_cpu_seconds();
    auto start = std::chrono::steady_clock::now();
    fn();
    t.samples_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    cpu_samples.push_back(process_cpu_seconds() - cpu_start);
  }
  std::vector<double> sorted = t.samples_s;
  std::sort(sorted.begin(), sorted.end());
  t.min_s = sorted.front();
  t.median_s = sorted[sorted.size() / 2];
  std::sort(cpu_samples.begin(), cpu_samples.end());
  t.cpu_min_s = cpu_samples.front();
  t.cpu_median_s = cpu_samples[cpu_samples.size() / 2];
  return t;
}

Tensor random_tensor(const Shape& shape, uint64_t seed) { return pipeline::randn(shape, seed); }

nlohmann::json line(const std::string& benchmark) {
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  return {{"bench", benchmark},
          {"openblas_coretype", coretype ? coretype : "unset"},
          {"hardware_threads", hardware_threads()},
          {"kernel_isa", kernels::isa_name(kernels::kernel_isa())}};
}

void print(const nlohmann::json& j) {
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

}  // namespace cpdit::bench
