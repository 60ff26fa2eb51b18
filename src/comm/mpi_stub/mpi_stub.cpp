// The MPI engine of a build without Open MPI: it says so.
#include <cpdit/comm/mpi.hpp>
#include <cpdit/core/error.hpp>

#include <cstdio>
#include <cstdlib>

namespace cpdit::comm {

bool mpi_available() { return false; }

std::shared_ptr<Communicator> mpi_world(const CommOptions&) {
  fail(ErrorKind::unsupported,
       "this cpdit was built without Open MPI; install libopenmpi-dev and rebuild with -DCPDIT_MPI=ON, "
       "or run without mpirun to use thread ranks");
}

void abort_job(const std::string& message) {
  std::fprintf(stderr, "cpdit: error: %s\n", message.c_str());
  std::fflush(stderr);
  std::exit(2);
}

}  // namespace cpdit::comm
