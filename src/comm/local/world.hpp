#pragma once
// Shared state of one run_local: the ranks (threads), their groups (one per communicator) and the
// failure record. One mutex guards all of it; copies of message data run outside the lock.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace cpdit::comm::local {

using Clock = std::chrono::steady_clock;

// One posted send or receive. The party that completes a match copies the bytes, straight from the
// sender's buffer into the receiver's, with the lock released (state `copying`).
struct Post {
  enum class State { posted, copying, done, failed };
  const void* send = nullptr;
  void* recv = nullptr;
  size_t bytes = 0;
  State state = State::posted;
  std::string error;  // why the match failed (state failed)
  bool is_send = false;
  std::tuple<int, int, int> key;  // (source, destination, tag): its channel while posted
};

// Unmatched posts of one (source, destination, tag), in posting order.
struct Channel {
  std::deque<std::shared_ptr<Post>> sends;
  std::deque<std::shared_ptr<Post>> recvs;
};

struct Group;

// What a rank publishes at a collective's rendezvous. Peers read it between the two barriers that
// bracket the collective, so it stays valid while they do.
struct Slot {
  const char* operation = nullptr;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t bytes = 0;
  const std::vector<size_t>* sizes = nullptr;
  int color = 0;
  int key = 0;
  std::shared_ptr<Group> child = nullptr;  // split: the new group, published by its first rank
};

// The state behind one communicator, shared by its ranks.
struct Group {
  explicit Group(std::vector<int> ranks) : world_ranks(std::move(ranks)), slots(world_ranks.size()) {}
  std::vector<int> world_ranks;  // group rank -> world rank
  int arrived = 0;               // barrier: ranks waiting in the current generation
  uint64_t generation = 0;
  std::vector<Slot> slots;
  std::map<std::tuple<int, int, int>, Channel> channels;  // (source, destination, tag)
};

class World {
 public:
  enum class Wait { ready, failed, rank_gone, timed_out };

  explicit World(int size);
  int size() const { return size_; }

  // The rest is called with `mutex` held.
  // Records that a rank's function threw. The first failure is the one run_local rethrows.
  void record_failure(int world_rank, std::exception_ptr error);
  void finish(int world_rank);  // the rank's function returned
  bool failed() const { return failed_rank_ >= 0; }
  std::exception_ptr first_error() const { return first_error_; }
  // "rank 2 failed: <message>"
  std::string failure() const;
  // The first of `world_ranks` whose function has returned, or -1.
  int gone(const std::vector<int>& world_ranks) const;

  // Waits until ready() holds, the world fails, one of `needed` (world ranks) has returned
  // from its function, or the deadline passes (checked in that order).
  template <class Ready>
  Wait wait(std::unique_lock<std::mutex>& lock, Clock::time_point deadline, Ready ready,
            const std::vector<int>& needed) {
    for (;;) {
      if (ready()) return Wait::ready;
      if (failed()) return Wait::failed;
      if (gone(needed) >= 0) return Wait::rank_gone;
      if (cv.wait_until(lock, deadline) == std::cv_status::timeout && !ready()) return Wait::timed_out;
    }
  }

  // Throws the error for a wait that ended without ready(): `rank` was in `what`.
  [[noreturn]] void throw_wait(Wait result, const std::string& what, int rank, const std::vector<int>& needed,
                               std::chrono::milliseconds timeout) const;

  std::mutex mutex;
  std::condition_variable cv;

 private:
  int size_;
  std::vector<bool> finished_;
  int failed_rank_ = -1;
  std::string failed_message_;
  std::exception_ptr first_error_;
};

}  // namespace cpdit::comm::local
