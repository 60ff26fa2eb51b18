// The mpirun subset of the context-parallel parity matrix (tests/parallel/extra.cmake runs it with
// 4 processes). Without an MPI launcher it runs the same cases on 4 local thread ranks.
#include "parallel/cp_case.hpp"

#include <cpdit/comm/launch.hpp>

#include <atomic>
#include <cstdio>

int main() {
  using namespace cpdit::parallel::test;
  std::atomic<int> failures{0};
  cpdit::comm::run_ranks(4, [&](cpdit::comm::Communicator& comm) {
    std::shared_ptr<cpdit::comm::Communicator> world(&comm, [](cpdit::comm::Communicator*) {});
    for (const CpCase& c : mpi_subset()) {
      const CpErrors e = check_case(world, c);
      const bool ok = e.out <= out_tolerance(c) && e.lse <= 1e-5 && e.dq <= grad_tolerance(c) &&
                      e.dk <= grad_tolerance(c) && e.dv <= grad_tolerance(c);
      if (!ok) ++failures;
      if (comm.rank() == 0)
        std::printf("%s %s out %.2e lse %.2e dq %.2e dk %.2e dv %.2e (%s)\n", ok ? "ok  " : "FAIL",
                    c.name().c_str(), e.out, e.lse, e.dq, e.dk, e.dv, comm.engine().c_str());
    }
  });
  return failures == 0 ? 0 : 1;
}
