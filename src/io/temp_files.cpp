#include "temp_files.hpp"

#include <array>
#include <atomic>
#include <csignal>
#include <cstring>
#include <mutex>

#include <unistd.h>

namespace cpdit::io {
namespace {

// Fixed storage: a signal handler may only read memory that is never reallocated, and unlink. Enough
// slots for every file an OutputBatch holds at once (a long clip's frames); the states lie apart from
// the paths, so a scan reads one small array and a path's page is touched only once it is used.
constexpr int kSlots = 4096;
constexpr size_t kMaxPath = 4096;

std::array<std::atomic<int>, kSlots> states;  // 0 free, 1 being filled, 2 holds a path
std::array<std::array<char, kMaxPath>, kSlots> paths;

struct sigaction previous_int, previous_term;

void remove_all_and_chain(int signal) {
  for (int i = 0; i < kSlots; ++i)
    if (states[size_t(i)].load() == 2) ::unlink(paths[size_t(i)].data());
  const struct sigaction& previous = signal == SIGINT ? previous_int : previous_term;
  ::sigaction(signal, &previous, nullptr);
  if (previous.sa_handler == SIG_IGN) return;
  ::raise(signal);  // delivered when this handler returns: the previous disposition takes over
}

void install_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action = {};
    action.sa_handler = remove_all_and_chain;
    ::sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, &previous_int);
    ::sigaction(SIGTERM, &action, &previous_term);
  });
}

}  // namespace

int remember_temp_file(const std::string& path) {
  if (path.size() >= kMaxPath) return -1;
  install_once();
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (!states[size_t(i)].compare_exchange_strong(expected, 1)) continue;
    std::memcpy(paths[size_t(i)].data(), path.c_str(), path.size() + 1);
    states[size_t(i)].store(2);
    return i;
  }
  return -1;
}

void forget_temp_file(int slot) {
  if (slot >= 0) states[size_t(slot)].store(0);
}

}  // namespace cpdit::io
