#include "runtime.hpp"

#include <cpdit/comm/launch.hpp>
#include <cpdit/comm/mpi.hpp>
#include <cpdit/core/error.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace cpdit::comm::mpi {

namespace {

struct Runtime {
  Runtime() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
      owner = true;
    }
    int provided = 0;
    MPI_Query_thread(&provided);
    CPDIT_CHECK(provided >= MPI_THREAD_SERIALIZED, unsupported,
                "this Open MPI provides thread level ", provided,
                "; cpdit needs MPI_THREAD_SERIALIZED or better (rebuild Open MPI with thread support)");
    check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  }
  ~Runtime() {
    if (owner && active()) MPI_Finalize();
  }
  bool owner = false;
};

}  // namespace

void ensure_initialized() { static Runtime runtime; }

bool active() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

std::mutex& call_mutex() {
  static std::mutex mutex;
  return mutex;
}

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  fail(ErrorKind::comm, call, " failed: ", std::string(text, size_t(length)));
}

bool wait_all(std::vector<MPI_Request>& requests, MPI_Status* statuses, Clock::time_point deadline) {
  // Spin with yields while the wait is short (transfers need MPI calls to progress); sleep between
  // polls once it is long, when a peer is computing rather than sending.
  const auto start = Clock::now();
  for (;;) {
    int done = 0;
    {
      std::lock_guard lock(call_mutex());
      check(MPI_Testall(int(requests.size()), requests.data(), &done, statuses), "MPI_Testall");
    }
    if (done) return true;
    auto now = Clock::now();
    if (now >= deadline) return false;
    if (now - start < std::chrono::seconds(1))
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void abandon(std::vector<MPI_Request>& requests, std::chrono::milliseconds patience, const std::string& why) noexcept {
  if (!active()) return;
  std::lock_guard lock(call_mutex());
  for (MPI_Request& r : requests)
    if (r != MPI_REQUEST_NULL) MPI_Cancel(&r);
  // MPI reads a send's buffer (or writes a receive's) until the request completes, and Open MPI
  // cannot cancel a send: freeing the request early would let it touch memory the caller frees next.
  const auto deadline = Clock::now() + patience;
  for (MPI_Request& r : requests) {
    int done = 0;
    while (r != MPI_REQUEST_NULL && !done && Clock::now() < deadline) MPI_Test(&r, &done, MPI_STATUS_IGNORE);
    if (r != MPI_REQUEST_NULL && !done) {
      std::fprintf(stderr, "cpdit: error: %s, and the transfer neither completed nor cancelled within %.1f s more; "
                           "ending the job rather than free a buffer MPI may still use\n",
                   why.c_str(), double(patience.count()) / 1000.0);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
}

}  // namespace cpdit::comm::mpi

namespace cpdit::comm {

bool mpi_available() { return true; }

void abort_job(const std::string& message) {
  int rank = -1;
  if (mpi::active()) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "cpdit: error: %s\n", rank_message(rank, message).c_str());
  std::fflush(stderr);
  if (mpi::active()) MPI_Abort(MPI_COMM_WORLD, 2);
  std::exit(2);
}

}  // namespace cpdit::comm
