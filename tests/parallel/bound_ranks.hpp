#pragma once
// The largest |got - want| over every rank of `ranks` local ranks (one compute thread each), each
// running `got` with a ParallelContext of `config` bound on its thread, as a model's forward binds it.
// A rank whose result has another number of elements than `want` counts as infinitely wrong.
#include "kernels/reference.hpp"

#include <cpdit/comm/local.hpp>
#include <cpdit/parallel/context.hpp>

#include <cmath>
#include <functional>
#include <mutex>

namespace cpdit::test {

inline double worst_rank_error(int ranks, const parallel::ContextParallelConfig& config, const Tensor& want,
                               const std::function<Tensor(comm::Communicator&)>& got) {
  const std::vector<double> expected = to_double(want);
  double worst = 0.0;
  std::mutex mutex;
  comm::LocalOptions one_thread_each;
  one_thread_each.threads_per_rank = 1;
  comm::run_local(ranks, [&](comm::Communicator& comm) {
    parallel::ParallelContext context(std::shared_ptr<comm::Communicator>(&comm, [](comm::Communicator*) {}), config);
    attention::ScopedRouter bound(&context);
    parallel::ScopedContext rows(&context);
    const std::vector<double> actual = to_double(got(comm));
    double error = actual.size() == expected.size() ? 0.0 : INFINITY;
    for (size_t i = 0; i < expected.size() && i < actual.size(); ++i)
      error = std::max(error, std::abs(expected[i] - actual[i]));
    std::lock_guard lock(mutex);
    worst = std::max(worst, error);
  }, one_thread_each);
  return worst;
}

}  // namespace cpdit::test
