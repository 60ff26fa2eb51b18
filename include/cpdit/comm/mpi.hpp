#pragma once
// The `mpi` engine: Open MPI processes. MPI is initialised on the first mpi_world() call
// (MPI_Init_thread asking for MPI_THREAD_MULTIPLE; at least MPI_THREAD_SERIALIZED is required, and
// cpdit serialises its own MPI calls) and finalised at process exit. MPI errors are returned, not
// fatal, and become cpdit::Error. In a build without Open MPI, mpi_world() throws `unsupported`.
#include <cpdit/comm/communicator.hpp>

#include <memory>
#include <string>

namespace cpdit::comm {

// True when this build has the MPI engine.
bool mpi_available();

// The launched processes (MPI_COMM_WORLD), created on first use.
std::shared_ptr<Communicator> mpi_world(const CommOptions& options = {});

// Prints "cpdit: error: rank R: <message>" on stderr and ends every process of the job
// (MPI_Abort with code 2). Use it when an error escapes under MPI: the other ranks may be blocked
// in a collective and would otherwise wait for their timeout.
[[noreturn]] void abort_job(const std::string& message);

}  // namespace cpdit::comm
