#include "temp_files.hpp"

#include <array>
#include <atomic>
#include <csignal>
#include <cstring>
#include <mutex>

#include <unistd.h>

namespace cpdit::io {
namespace {

// Fixed storage: a signal handler may only read memory that is never reallocated, and unlink.
constexpr int kSlots = 64;
constexpr size_t kMaxPath = 4096;

struct Slot {
  std::atomic<int> state{0};  // 0 free, 1 being filled, 2 holds a path
  char path[kMaxPath];
};
std::array<Slot, kSlots> slots;

struct sigaction previous_int, previous_term;

void remove_all_and_chain(int signal) {
  for (Slot& slot : slots)
    if (slot.state.load() == 2) ::unlink(slot.path);
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
    if (!slots[size_t(i)].state.compare_exchange_strong(expected, 1)) continue;
    std::memcpy(slots[size_t(i)].path, path.c_str(), path.size() + 1);
    slots[size_t(i)].state.store(2);
    return i;
  }
  return -1;
}

void forget_temp_file(int slot) {
  if (slot >= 0) slots[size_t(slot)].state.store(0);
}

}  // namespace cpdit::io
