// Collectives of the local engine: every rank publishes its buffers at a rendezvous and copies what
// it needs straight from its peers' buffers; a second barrier ends the reading.
#include "local_communicator.hpp"
#include "../reduce.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/core/tensor.hpp>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string_view>

namespace cpdit::comm::local {

namespace {

void copy_bytes(void* to, const void* from, size_t bytes) {
  if (bytes > 0 && to != from) std::memcpy(to, from, bytes);
}

std::byte* at(void* base, size_t offset) { return static_cast<std::byte*>(base) + offset; }
const std::byte* at(const void* base, size_t offset) { return static_cast<const std::byte*>(base) + offset; }

size_t sum_before(const std::vector<size_t>& sizes, int end) {
  return std::accumulate(sizes.begin(), sizes.begin() + end, size_t{0});
}

}  // namespace

LocalCommunicator::LocalCommunicator(std::shared_ptr<World> world, std::shared_ptr<Group> group, int rank,
                                     CommOptions options)
    : Communicator(options), world_(std::move(world)), group_(std::move(group)), rank_(rank),
      world_rank_(group_->world_ranks[rank]) {}

std::string LocalCommunicator::name_peer(int peer) const {
  int world_rank = group_->world_ranks[peer];
  if (size() == world_->size() && world_rank == peer) return detail::concat("rank ", peer);
  return detail::concat("rank ", peer, " of a ", size(), "-rank group (world rank ", world_rank, ")");
}

void LocalCommunicator::check_peer(int peer, const char* operation) const {
  CPDIT_CHECK(peer >= 0 && peer < size(), invalid_argument, operation, " on rank ", world_rank_, ": peer ", peer,
              " is outside the communicator of ", size(), " ranks");
}

void LocalCommunicator::check_sizes(const std::vector<size_t>& sizes, const char* operation) const {
  CPDIT_CHECK(int(sizes.size()) == size(), invalid_argument, operation, " on rank ", world_rank_, ": got ",
              sizes.size(), " per-rank sizes for a communicator of ", size(), " ranks");
}

void LocalCommunicator::sync_locked(std::unique_lock<std::mutex>& lock, const char* operation,
                                    Clock::time_point deadline) {
  Group& g = *group_;
  uint64_t generation = g.generation;
  if (++g.arrived == size()) {
    g.arrived = 0;
    ++g.generation;
    world_->cv.notify_all();
    return;
  }
  auto result = world_->wait(lock, deadline, [&] { return g.generation != generation; }, g.world_ranks);
  if (result == World::Wait::ready) return;
  --g.arrived;  // leave the barrier as it was, so a rank that recovers from a timeout can go on
  world_->throw_wait(result, detail::concat(operation, " on a ", size(), "-rank communicator"), world_rank_,
                     g.world_ranks, timeout());
}

void LocalCommunicator::sync(const char* operation, Clock::time_point deadline) {
  std::unique_lock lock(world_->mutex);
  sync_locked(lock, operation, deadline);
}

const std::vector<Slot>& LocalCommunicator::meet(const Slot& mine, Clock::time_point deadline) {
  std::unique_lock lock(world_->mutex);
  if (world_->failed())
    fail(ErrorKind::comm, world_->failure(), " (rank ", world_rank_, " was starting ", mine.operation, ")");
  group_->slots[rank_] = mine;
  sync_locked(lock, mine.operation, deadline);
  const auto& slots = group_->slots;
  for (int p = 0; p < size(); ++p)
    CPDIT_CHECK(std::string_view(slots[p].operation) == mine.operation, comm, "rank ", world_rank_, " called ",
                mine.operation, " while ", name_peer(p), " called ", slots[p].operation,
                "; every rank must call the same collectives in the same order");
  return slots;
}

// Two barriers like every collective: the first one's slot check must end before anyone publishes
// the slot of its next collective.
void LocalCommunicator::barrier() {
  auto until = deadline();
  meet(Slot{.operation = "barrier"}, until);
  sync("barrier", until);
}

void LocalCommunicator::all_gather(const void* send, size_t bytes, void* recv) {
  auto until = deadline();
  const auto& slots = meet(Slot{.operation = "all_gather", .send = send, .bytes = bytes}, until);
  for (int p = 0; p < size(); ++p) {
    CPDIT_CHECK(slots[p].bytes == bytes, invalid_argument, "all_gather: ", name_peer(p), " sends ", slots[p].bytes,
                " bytes but rank ", world_rank_, " sends ", bytes, "; use all_gather_v for uneven sizes");
    copy_bytes(at(recv, p * bytes), slots[p].send, bytes);
  }
  sync("all_gather", until);
}

void LocalCommunicator::all_gather_v(const void* send, size_t bytes, void* recv,
                                     const std::vector<size_t>& bytes_per_rank) {
  check_sizes(bytes_per_rank, "all_gather_v");
  CPDIT_CHECK(bytes == bytes_per_rank[rank_], invalid_argument, "all_gather_v on rank ", world_rank_, ": sends ",
              bytes, " bytes but bytes_per_rank says ", bytes_per_rank[rank_]);
  auto until = deadline();
  const auto& slots = meet(Slot{.operation = "all_gather_v", .send = send, .bytes = bytes}, until);
  size_t offset = 0;
  for (int p = 0; p < size(); ++p) {
    CPDIT_CHECK(slots[p].bytes == bytes_per_rank[p], invalid_argument, "all_gather_v: ", name_peer(p), " sends ",
                slots[p].bytes, " bytes but rank ", world_rank_, " expects ", bytes_per_rank[p]);
    copy_bytes(at(recv, offset), slots[p].send, slots[p].bytes);
    offset += slots[p].bytes;
  }
  sync("all_gather_v", until);
}

void LocalCommunicator::all_to_all(const void* send, void* recv, size_t bytes_per_peer) {
  auto until = deadline();
  const auto& slots = meet(Slot{.operation = "all_to_all", .send = send, .bytes = bytes_per_peer}, until);
  for (int p = 0; p < size(); ++p) {
    CPDIT_CHECK(slots[p].bytes == bytes_per_peer, invalid_argument, "all_to_all: ", name_peer(p), " sends ",
                slots[p].bytes, " bytes per peer but rank ", world_rank_, " sends ", bytes_per_peer,
                "; use all_to_all_v for uneven sizes");
    copy_bytes(at(recv, p * bytes_per_peer), at(slots[p].send, rank_ * bytes_per_peer), bytes_per_peer);
  }
  sync("all_to_all", until);
}

void LocalCommunicator::all_to_all_v(const void* send, const std::vector<size_t>& send_bytes, void* recv,
                                     const std::vector<size_t>& recv_bytes) {
  check_sizes(send_bytes, "all_to_all_v");
  check_sizes(recv_bytes, "all_to_all_v");
  auto until = deadline();
  const auto& slots = meet(Slot{.operation = "all_to_all_v", .send = send, .sizes = &send_bytes}, until);
  size_t offset = 0;
  for (int p = 0; p < size(); ++p) {
    const std::vector<size_t>& theirs = *slots[p].sizes;
    CPDIT_CHECK(theirs[rank_] == recv_bytes[p], invalid_argument, "all_to_all_v: ", name_peer(p), " sends ",
                theirs[rank_], " bytes to rank ", world_rank_, ", which expects ", recv_bytes[p]);
    copy_bytes(at(recv, offset), at(slots[p].send, sum_before(theirs, rank_)), recv_bytes[p]);
    offset += recv_bytes[p];
  }
  sync("all_to_all_v", until);
}

void LocalCommunicator::all_reduce(void* data, size_t count, DType dtype, ReduceOp op) {
  check_reducible(dtype, "all_reduce");
  const size_t elem = dtype_size(dtype);
  auto until = deadline();
  const auto& slots = meet(Slot{.operation = "all_reduce", .recv = data, .bytes = count * elem}, until);
  std::vector<const void*> inputs;
  for (int p = 0; p < size(); ++p) {
    CPDIT_CHECK(slots[p].bytes == count * elem, invalid_argument, "all_reduce: ", name_peer(p), " reduces ",
                slots[p].bytes, " bytes but rank ", world_rank_, " reduces ", count * elem);
    inputs.push_back(slots[p].recv);
  }
  // Each rank reduces one slice of the elements, then writes its slice into every rank's buffer.
  const size_t first = size_t(split_offset(int64_t(count), size(), rank_));
  const size_t length = size_t(split_sizes(int64_t(count), size())[rank_]);
  scratch_.resize(std::max(scratch_.size(), length * elem));
  reduce_elements(inputs, first, length, scratch_.data(), dtype, op);
  sync("all_reduce", until);
  for (int p = 0; p < size(); ++p) copy_bytes(at(slots[p].recv, first * elem), scratch_.data(), length * elem);
  sync("all_reduce", until);
}

void LocalCommunicator::reduce_scatter(const void* send, void* recv, size_t count_per_rank, DType dtype,
                                       ReduceOp op) {
  check_reducible(dtype, "reduce_scatter");
  const size_t bytes = count_per_rank * dtype_size(dtype) * size_t(size());
  auto until = deadline();
  const auto& slots = meet(Slot{.operation = "reduce_scatter", .send = send, .bytes = bytes}, until);
  std::vector<const void*> inputs;
  for (int p = 0; p < size(); ++p) {
    CPDIT_CHECK(slots[p].bytes == bytes, invalid_argument, "reduce_scatter: ", name_peer(p), " reduces ",
                slots[p].bytes, " bytes but rank ", world_rank_, " reduces ", bytes);
    inputs.push_back(slots[p].send);
  }
  reduce_elements(inputs, size_t(rank_) * count_per_rank, count_per_rank, recv, dtype, op);
  sync("reduce_scatter", until);
}

void LocalCommunicator::broadcast(void* data, size_t bytes, int root) {
  check_peer(root, "broadcast");
  auto until = deadline();
  const auto& slots = meet(Slot{.operation = "broadcast", .recv = data, .bytes = bytes}, until);
  CPDIT_CHECK(slots[root].bytes == bytes, invalid_argument, "broadcast: root ", name_peer(root), " sends ",
              slots[root].bytes, " bytes but rank ", world_rank_, " expects ", bytes);
  if (rank_ != root) copy_bytes(data, slots[root].recv, bytes);
  sync("broadcast", until);
}

std::shared_ptr<Communicator> LocalCommunicator::split(int color, int key) {
  auto until = deadline();
  const auto& slots = meet(Slot{.operation = "split", .color = color, .key = key}, until);
  std::vector<int> members;  // old ranks of my new group, in new-rank order
  for (int p = 0; p < size(); ++p)
    if (slots[p].color == color) members.push_back(p);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return slots[a].key < slots[b].key; });

  // The new group's first rank creates it; the others pick it up after the next barrier.
  if (color >= 0 && members.front() == rank_) {
    std::vector<int> world_ranks;
    for (int p : members) world_ranks.push_back(group_->world_ranks[p]);
    auto child = std::make_shared<Group>(std::move(world_ranks));
    std::lock_guard lock(world_->mutex);
    group_->slots[rank_].child = std::move(child);
  }
  sync("split", until);
  std::shared_ptr<Communicator> result;
  if (color >= 0) {
    int new_rank = int(std::find(members.begin(), members.end(), rank_) - members.begin());
    result = std::make_shared<LocalCommunicator>(world_, slots[members.front()].child, new_rank, options_);
  }
  sync("split", until);
  return result;
}

}  // namespace cpdit::comm::local
