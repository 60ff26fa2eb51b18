#include "kernels/cpu/signals_held.hpp"

#include <initializer_list>

#include <omp.h>
#include <pthread.h>

namespace cpdit::kernels::detail {

namespace {

const sigset_t& asynchronous_signals() {
  static const sigset_t set = [] {
    sigset_t s;
    sigfillset(&s);
    // Raised by a fault on the faulting thread itself: holding them off would hide the fault.
    for (int fault : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS}) sigdelset(&s, fault);
    return s;
  }();
  return set;
}

// Every worker of the team oneDNN is about to use, once per worker thread (the pool may replace them).
// Workers the team starts now are made while the calling thread holds signals off, and inherit that.
void hold_on_workers(int team) {
  if (team <= 1) return;
#pragma omp parallel num_threads(team)
  {
    thread_local bool held = false;
    if (omp_get_thread_num() != 0 && !held) {
      pthread_sigmask(SIG_BLOCK, &asynchronous_signals(), nullptr);
      held = true;
    }
  }
}

}  // namespace

SignalsHeld::SignalsHeld() {
  pthread_sigmask(SIG_BLOCK, &asynchronous_signals(), &previous_);
  hold_on_workers(omp_get_max_threads());
}

SignalsHeld::~SignalsHeld() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }

}  // namespace cpdit::kernels::detail
