#pragma once
// An exception must not leave an OpenMP parallel region: the runtime calls std::terminate and the
// process dies with "terminate called ..." instead of a one-line error. A kernel whose region calls
// code that may throw (gemm, a mask check) runs each iteration through TeamErrors::run, which keeps
// the first exception and skips the iterations after it, and calls rethrow() once the region is over:
//
//   TeamErrors errors;
//   #pragma omp parallel for
//   for (int64_t i = 0; i < n; ++i) errors.run([&] { work(i); });
//   errors.rethrow();
#include <atomic>
#include <exception>
#include <mutex>

namespace cpdit {

class TeamErrors {
 public:
  template <class Body>
  void run(Body&& body) noexcept {
    if (failed_.load(std::memory_order_relaxed)) return;  // the result is lost anyway: stop early
    try {
      body();
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!first_) first_ = std::current_exception();
      failed_.store(true, std::memory_order_relaxed);
    }
  }

  // After the region: throws the first exception an iteration threw, if any.
  void rethrow() const {
    if (first_) std::rethrow_exception(first_);
  }

 private:
  std::atomic<bool> failed_{false};
  std::mutex mutex_;
  std::exception_ptr first_;
};

}  // namespace cpdit
