#pragma once
// Context-parallel flags of `cpdit attention` (--ring, --ulysses, --rotate, --ranks): the inputs are
// split across R x U ranks (local threads, or the MPI ranks under mpirun), attention runs through
// parallel::ParallelContext, and the full out / lse are gathered back.
#include <CLI/CLI.hpp>
#include <cpdit/attention/attention.hpp>

#include <string>

namespace cpdit::app {

struct CpFlags {
  int ring = 0, ulysses = 0, ranks = 0;  // 0: not given
  std::string rotate = "p2p";
};

void add_cp_flags(CLI::App& cmd, CpFlags& flags);

// True when the flags (or an mpirun launch) ask for more than a plain local call.
bool cp_requested(const CpFlags& flags);

// Validates the configuration against the inputs and the backend before any rank starts (one-line
// errors), then runs. Returns the gathered result on rank 0; other MPI ranks get an empty Result.
// threads: compute threads per rank, 0 = cores / local ranks.
attention::Result run_context_parallel(const CpFlags& flags, const Tensor& q, const Tensor& k,
                                       const Tensor& v, const attention::Mask& mask,
                                       const attention::Backend& backend, int threads);

}  // namespace cpdit::app
