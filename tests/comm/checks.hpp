#pragma once
// The communicator contract as checks that run on any engine: under run_local for N = 1..5 in the
// gtest binary test_comm, and on the MPI world in test_comm_mpi under mpirun. A check throws on
// failure (gtest is not available under mpirun), naming file, line and rank.
#include <cpdit/comm/communicator.hpp>
#include <cpdit/core/error.hpp>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace cpdit::comm::testing {

struct Check {
  std::string name;
  void (*run)(Communicator& comm);
  // Slow to set up (64 MiB of fresh memory, very slow under sanitizers) and indifferent to the
  // rank count: the local suite runs it at one N only.
  bool heavy = false;
};

// Every check of the contract, in a fixed order.
const std::vector<Check>& contract_checks();

void add_p2p_checks(std::vector<Check>& checks);
void add_collective_checks(std::vector<Check>& checks);
void add_group_checks(std::vector<Check>& checks);
void add_tensor_checks(std::vector<Check>& checks);

// Runs fn, which must throw cpdit::Error of `kind` whose message contains every one of `parts`.
void expect_error(const std::function<void()>& fn, ErrorKind kind, const std::vector<std::string>& parts);

// A value that depends on who sent it to whom and where: exact in f32 and distinct enough to catch
// a block from the wrong rank or offset.
inline float pattern(int source, int destination, size_t i) {
  return float((size_t(source) * 131 + size_t(destination) * 17 + i) % 1009);
}

// Values 0 .. n - 1 of the pattern from `source` to `destination` (-1: the same to every rank).
inline std::vector<float> pattern_block(int source, int destination, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = pattern(source, destination, i);
  return v;
}

}  // namespace cpdit::comm::testing

#define COMM_EXPECT(comm, cond, ...)                                                                              \
  do {                                                                                                            \
    if (!(cond))                                                                                                  \
      throw std::runtime_error(::cpdit::detail::concat(__FILE__, ":", __LINE__, ": rank ", (comm).rank(), " of ", \
                                                       (comm).size(),                                             \
                                                       ": expected " #cond __VA_OPT__(, " ", ) __VA_ARGS__));     \
  } while (0)
