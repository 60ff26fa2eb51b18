#include "world.hpp"

#include <cpdit/core/error.hpp>

namespace cpdit::comm::local {

namespace {
std::string message_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}
}  // namespace

World::World(int size) : size_(size), finished_(size, false) {}

void World::record_failure(int world_rank, std::exception_ptr error) {
  if (failed()) return;
  failed_rank_ = world_rank;
  failed_message_ = message_of(error);
  first_error_ = error;
  cv.notify_all();
}

void World::finish(int world_rank) {
  finished_[world_rank] = true;
  cv.notify_all();
}

std::string World::failure() const { return detail::concat("rank ", failed_rank_, " failed: ", failed_message_); }

int World::gone(const std::vector<int>& world_ranks) const {
  for (int r : world_ranks)
    if (finished_[r]) return r;
  return -1;
}

void World::throw_wait(Wait result, const std::string& what, int rank, const std::vector<int>& needed,
                       std::chrono::milliseconds timeout) const {
  switch (result) {
    case Wait::failed: cpdit::fail(ErrorKind::comm, failure(), " (rank ", rank, " was in ", what, ")");
    case Wait::rank_gone:
      cpdit::fail(ErrorKind::comm, "rank ", rank, ": ", what, " cannot complete: rank ", gone(needed),
           " returned from its function without taking part");
    case Wait::timed_out:
      cpdit::fail(ErrorKind::timeout, "rank ", rank, ": ", what, " timed out after ", double(timeout.count()) / 1000.0,
           " s; raise CPDIT_COMM_TIMEOUT_S if the peers are only slow");
    case Wait::ready: break;
  }
  cpdit::fail(ErrorKind::internal, "rank ", rank, ": throw_wait called for a wait that succeeded (", what, ")");
}

}  // namespace cpdit::comm::local
