#include "pipeline/memory_check.hpp"

#include <cpdit/core/weight.hpp>

#include <cpdit/core/error.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

namespace cpdit::pipeline {

namespace {
double read_number(const char* path) {  // 0 when missing or "max"
  std::ifstream in(path);
  double value = 0;
  return in >> value ? value : 0;
}

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g GiB", bytes / double(1 << 30));
  return text;
}
}  // namespace

double available_memory_bytes() {
  double available = 0;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    double kib = 0;
    if (key == "MemAvailable:" && meminfo >> kib) available = kib * 1024;
  }
  if (const double limit = read_number("/sys/fs/cgroup/memory.max"); limit > 0)
    available = std::min(available, std::max(0.0, limit - read_number("/sys/fs/cgroup/memory.current")));
  return available;
}

void check_generate_fits(double latent_elements, double tokens, double hidden) {
  const double needed = double(weight_memory_counter().peak()) + 3 * 4 * latent_elements + 2 * 4 * tokens * hidden;
  const double available = available_memory_bytes();
  CPDIT_CHECK(available <= 0 || needed <= available, invalid_argument, "this run needs at least ", gib(needed),
              " (weights, latents and one block's activations) but ", gib(available),
              " of memory is available; lower --height/--width/--frames");
}

}  // namespace cpdit::pipeline
