#include "mpi_arguments.hpp"

#include <cpdit/comm/launch.hpp>
#include <cpdit/comm/mpi.hpp>
#include <cpdit/core/error.hpp>

#include <cstdint>
#include <string_view>
#include <vector>

namespace cpdit::app {

namespace {
// FNV-1a over the arguments, each followed by a 0 byte so that ("ab", "c") and ("a", "bc") differ.
uint64_t digest(int argc, const char* const* argv) {
  uint64_t hash = 14695981039346656037ull;
  auto mix = [&hash](unsigned char byte) { hash = (hash ^ byte) * 1099511628211ull; };
  for (int i = 1; i < argc; ++i) {
    for (char c : std::string_view(argv[i])) mix(static_cast<unsigned char>(c));
    mix(0);
  }
  return hash;
}
}  // namespace

void check_same_arguments_across_ranks(int argc, const char* const* argv) {
  if (!comm::launched_by_mpi() || !comm::mpi_available()) return;
  const std::shared_ptr<comm::Communicator> world = comm::mpi_world();
  const uint64_t mine = digest(argc, argv);
  std::vector<uint64_t> all(size_t(world->size()));
  world->all_gather(&mine, sizeof mine, all.data());
  for (int rank = 1; rank < world->size(); ++rank)
    CPDIT_CHECK(all[size_t(rank)] == all[0], invalid_argument, "the MPI processes were launched with different arguments (rank ",
                rank, "'s differ from rank 0's); give every process the same command line");
}

}  // namespace cpdit::app
