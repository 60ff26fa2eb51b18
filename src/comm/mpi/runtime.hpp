#pragma once
// Process-wide Open MPI state: initialised once, finalised at exit, every call checked and
// serialised (cpdit needs only MPI_THREAD_SERIALIZED), and completion polled against a deadline so
// that no operation blocks past its timeout.
#include <mpi.h>

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

namespace cpdit::comm::mpi {

using Clock = std::chrono::steady_clock;

// Initialises MPI on first use (MPI_Init_thread asking for MPI_THREAD_MULTIPLE, requiring at least
// MPI_THREAD_SERIALIZED, errors returned to the caller) and finalises it at process exit.
void ensure_initialized();
bool active();  // initialised and not yet finalised

// Held around every MPI call cpdit makes.
std::mutex& call_mutex();

// Throws Error(comm) "<call> failed: <MPI's message>" unless rc is MPI_SUCCESS.
void check(int rc, const char* call);

// Polls until every request completes (true) or the deadline passes (false). statuses may be
// MPI_STATUSES_IGNORE.
bool wait_all(std::vector<MPI_Request>& requests, MPI_Status* statuses, Clock::time_point deadline);

// Cancels what can be cancelled and waits up to `patience` for the rest to complete; a transfer still
// pending then ends the job (MPI_Abort) with `why`, since its buffer may be freed next. Never throws.
void abandon(std::vector<MPI_Request>& requests, std::chrono::milliseconds patience, const std::string& why) noexcept;

}  // namespace cpdit::comm::mpi
