#pragma once
// The progress line of a denoising loop, printed by rank 0 on stderr: a redrawn bar on a terminal,
// one plain line per step otherwise, nothing when silenced (--json).
#include <chrono>
#include <cstdint>
#include <string>

namespace cpdit::app {

class Progress {
 public:
  Progress(std::string label, bool silent);
  void step(int index, int total, double step_seconds);  // index is 0-based; called after the step

 private:
  std::string label_;
  bool silent_, terminal_;
  double elapsed_ = 0;
};

std::string format_duration(double seconds);  // "1:05", "12.3 s"
std::string format_bytes(uint64_t bytes);     // "512 B", "1.5 GiB"

}  // namespace cpdit::app
