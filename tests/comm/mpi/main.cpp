// test_comm_mpi: the contract checks on whatever engine the launch selects, outside gtest so that
// mpirun can start it. Under mpirun it uses the MPI world; without, --ranks thread ranks.
//   test_comm_mpi [--ranks N]   every check; exit 0 when all pass
//   test_comm_mpi --fault       rank 1 throws while the others are in a collective: the job must
//                               end non-zero with rank 1's message, not hang
#include "../checks.hpp"

#include <cpdit/comm/launch.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

using namespace cpdit;
using namespace cpdit::comm;

namespace {

void run_checks(Communicator& comm) {
  for (const auto& check : testing::contract_checks()) {
    check.run(comm);
    comm.barrier();
    if (comm.rank() == 0) std::printf("ok %s (%s engine, %d ranks)\n", check.name.c_str(), comm.engine().c_str(), comm.size());
  }
}

void fail_mid_collective(Communicator& comm) {
  std::vector<float> data(1024, 1.f), all(1024 * comm.size());
  comm.all_gather(data.data(), data.size() * 4, all.data());
  if (comm.rank() == 1) throw Error(ErrorKind::internal, "rank 1 fails on purpose mid-collective");
  comm.all_reduce(data.data(), data.size(), DType::f32, ReduceOp::sum);
  std::printf("rank %d: all_reduce completed although rank 1 failed\n", comm.rank());
}

}  // namespace

int main(int argc, char** argv) {
  int ranks = 4;
  bool fault = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--fault") == 0)
      fault = true;
    else if (std::strcmp(argv[i], "--ranks") == 0 && i + 1 < argc)
      ranks = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: test_comm_mpi [--ranks N] [--fault]\n");
      return 2;
    }
  }
  try {
    run_ranks(ranks, fault ? fail_mid_collective : run_checks);
  } catch (const std::exception& e) {  // local engine; under MPI run_ranks ends the job itself
    std::fprintf(stderr, "test_comm_mpi: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
