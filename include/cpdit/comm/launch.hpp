#pragma once
// Engine selection: under an MPI launcher the `mpi` engine with the launched processes as world,
// otherwise the `local` engine with a chosen number of thread ranks.
#include <cpdit/comm/local.hpp>

#include <functional>
#include <string>

namespace cpdit::comm {

// True when the environment shows an Open MPI launch (OMPI_COMM_WORLD_SIZE, PMIX_RANK, ...).
bool launched_by_mpi();

// The processes of this job on this machine (Open MPI's local size), which share its cores; 1 when
// not launched by MPI (local ranks are counted by the caller).
int ranks_on_this_machine();

// "rank R: message", unless the message already begins by naming rank R.
std::string rank_message(int rank, const std::string& message);

// Runs fn on every rank of the selected engine. Under MPI: fn(mpi_world()); an error escaping fn
// ends the whole job through abort_job (no return). Otherwise run_local(local_ranks, fn, options).
void run_ranks(int local_ranks, const std::function<void(Communicator&)>& fn,
               const LocalOptions& options = {});

}  // namespace cpdit::comm
