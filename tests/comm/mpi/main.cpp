// test_comm_mpi: the contract checks on whatever engine the launch selects, outside gtest so that
// mpirun can start it. Under mpirun it uses the MPI world; without, --ranks thread ranks.
//   test_comm_mpi [--ranks N]   every check; exit 0 when all pass
//   test_comm_mpi --fault       rank 1 throws while the others are in a collective: the job must
//                               end non-zero with rank 1's message, not hang
//   test_comm_mpi --dropped-send  rank 0 drops an isend's request before rank 1 receives, then reuses
//                               the buffer: rank 1 must still get the bytes as they were sent
#include "../checks.hpp"

#include <cpdit/comm/launch.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <chrono>
#include <exception>
#include <string>
#include <thread>
#include <vector>

using namespace cpdit;
using namespace cpdit::comm;

namespace {

void run_checks(Communicator& comm) {
  for (const auto& check : testing::contract_checks()) {
    check.run(comm);
    comm.barrier();
    if (comm.rank() == 0)
      std::printf("ok %s (%s engine, %d ranks)\n", check.name.c_str(), comm.engine().c_str(), comm.size());
  }
}

void fail_mid_collective(Communicator& comm) {
  std::vector<float> data(1024, 1.f), all(1024 * comm.size());
  comm.all_gather(data.data(), data.size() * 4, all.data());
  if (comm.rank() == 1) throw Error(ErrorKind::internal, "rank 1 fails on purpose mid-collective");
  comm.all_reduce(data.data(), data.size(), DType::f32, ReduceOp::sum);
  std::printf("rank %d: all_reduce completed although rank 1 failed\n", comm.rank());
}

// A request is dropped while its send is unmatched (rank 1 receives 1.5 s later), then the buffer is
// overwritten. 1 MiB is past every eager limit, so the bytes leave the sender's buffer only when the
// receive matches: a request freed too early would send the overwritten bytes.
void dropped_send(Communicator& comm) {
  constexpr size_t kCount = size_t(1) << 18;
  std::vector<float> buffer(kCount);
  if (comm.rank() == 0) {
    for (size_t i = 0; i < kCount; ++i) buffer[i] = float(i % 1000);
    comm.isend(buffer.data(), kCount * sizeof(float), 1).reset();
    std::fill(buffer.begin(), buffer.end(), -1.f);
  } else if (comm.rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    comm.recv(buffer.data(), kCount * sizeof(float), 0);
    for (size_t i = 0; i < kCount; ++i)
      if (buffer[i] != float(i % 1000))
        throw Error(ErrorKind::internal, "element " + std::to_string(i) + " arrived as " + std::to_string(buffer[i]) +
                                             ": the dropped send's buffer was reused early");
    std::printf("ok dropped send delivered intact\n");
  }
  comm.barrier();
}

}  // namespace

int main(int argc, char** argv) {
  int ranks = 4;
  bool fault = false, dropped = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--fault") == 0)
      fault = true;
    else if (std::strcmp(argv[i], "--dropped-send") == 0)
      dropped = true;
    else if (std::strcmp(argv[i], "--ranks") == 0 && i + 1 < argc)
      ranks = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: test_comm_mpi [--ranks N] [--fault | --dropped-send]\n");
      return 2;
    }
  }
  try {
    run_ranks(ranks, fault ? fail_mid_collective : dropped ? dropped_send : run_checks);
  } catch (const std::exception& e) {  // local engine; under MPI run_ranks ends the job itself
    std::fprintf(stderr, "test_comm_mpi: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
