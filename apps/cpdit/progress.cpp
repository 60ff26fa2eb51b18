#include "progress.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace cpdit::app {

std::string format_duration(double seconds) {
  char buffer[32];
  if (seconds < 60) {
    std::snprintf(buffer, sizeof buffer, "%.1f s", seconds);
  } else {
    long s = std::lround(seconds);
    std::snprintf(buffer, sizeof buffer, "%ld:%02ld", s / 60, s % 60);
  }
  return buffer;
}

std::string format_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = double(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) value /= 1024, ++unit;
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return text;
}

Progress::Progress(std::string label, bool silent)
    : label_(std::move(label)), silent_(silent), terminal_(isatty(STDERR_FILENO) == 1) {}

void Progress::step(int index, int total, double step_seconds) {
  elapsed_ += step_seconds;
  if (silent_) return;
  const int done = index + 1;
  const double per_step = elapsed_ / done;
  const std::string eta = format_duration(per_step * (total - done));
  if (!terminal_) {
    std::fprintf(stderr, "%s step %d/%d  %.2f s/it  elapsed %s  eta %s\n", label_.c_str(), done, total, step_seconds,
                 format_duration(elapsed_).c_str(), eta.c_str());
    return;
  }
  constexpr int kWidth = 30;
  const int filled = done * kWidth / total;
  std::string bar(size_t(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\r%s [%s] %d/%d  %.2f s/it  elapsed %s  eta %s ", label_.c_str(), bar.c_str(), done, total,
               per_step, format_duration(elapsed_).c_str(), eta.c_str());
  if (done == total) std::fputc('\n', stderr);
  std::fflush(stderr);
}

}  // namespace cpdit::app
