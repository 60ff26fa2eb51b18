#include <cpdit/pipeline/step_loop.hpp>

#include <chrono>

namespace cpdit::pipeline {

void run_steps(int first, int end, const std::function<void(int)>& step, const StepHook& hook, int total,
               std::vector<double>& seconds) {
  for (int i = first; i < end; ++i) {
    const auto start = std::chrono::steady_clock::now();
    step(i);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (hook) hook(int(seconds.size()) - 1, total, seconds.back());
  }
}

}  // namespace cpdit::pipeline
