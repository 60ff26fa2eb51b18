#include <cpdit/comm/launch.hpp>
#include <cpdit/comm/mpi.hpp>
#include <cpdit/core/threads.hpp>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <string>

namespace cpdit::comm {

namespace {
int env_int(const char* name, int fallback) {
  const char* text = std::getenv(name);
  return text != nullptr && *text != '\0' ? std::atoi(text) : fallback;
}
}  // namespace

bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

std::string rank_message(int rank, const std::string& message) {
  // Communication errors already name their rank ("rank 1: recv ... timed out"): say it once.
  const std::string prefix = "rank " + std::to_string(rank) + ": ";
  return message.rfind(prefix, 0) == 0 ? message : prefix + message;
}

int ranks_on_this_machine() {
  return launched_by_mpi() ? std::max(1, env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1)) : 1;
}

void run_ranks(int local_ranks, const std::function<void(Communicator&)>& fn, const LocalOptions& options) {
  if (!launched_by_mpi()) {
    run_local(local_ranks, fn, options);
    return;
  }
  try {
    // Processes sharing this machine share its cores.
    ScopedComputeThreads budget(options.threads_per_rank > 0
                                    ? options.threads_per_rank
                                    : std::max(1, hardware_threads() / ranks_on_this_machine()));
    fn(*mpi_world(options.comm));
  } catch (const std::exception& e) {
    abort_job(e.what());
  }
}

}  // namespace cpdit::comm
