#pragma once
// oneDNN 2.x's JIT f32 GEMM kernels (which its convolutions and matmuls may also run) point the stack
// register into a heap workspace while they run: a signal handled on a thread inside one has its frame
// written into the heap (oneDNN issue 4845, fixed in oneDNN 3.11; Debian 12 ships 2.6). So every call
// into oneDNN holds asynchronous signals off on the threads that run it, and what arrives meanwhile
// is delivered when the call returns: Ctrl-C still acts within one GEMM's time.
#include <csignal>

namespace cpdit::kernels::detail {

// While it lives, the calling thread holds asynchronous signals (all but the ones a fault raises) off;
// the workers of its OpenMP team, which oneDNN's calls run on too, hold them off for good (the calling
// thread, or another that computes nothing, takes them).
class SignalsHeld {
 public:
  SignalsHeld();
  ~SignalsHeld();
  SignalsHeld(const SignalsHeld&) = delete;
  SignalsHeld& operator=(const SignalsHeld&) = delete;

 private:
  sigset_t previous_;
};

}  // namespace cpdit::kernels::detail
