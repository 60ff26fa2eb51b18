#pragma once
// One rank's view of a group of the local engine.
#include "world.hpp"

#include <cpdit/comm/communicator.hpp>

namespace cpdit::comm::local {

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<World> world, std::shared_ptr<Group> group, int rank, CommOptions options);

  int rank() const override { return rank_; }
  int size() const override { return int(group_->world_ranks.size()); }
  std::string engine() const override { return "local"; }
  std::shared_ptr<Communicator> split(int color, int key) override;

  void send(const void* data, size_t bytes, int peer, int tag) override;
  void recv(void* data, size_t bytes, int peer, int tag) override;
  std::unique_ptr<Request> isend(const void* data, size_t bytes, int peer, int tag) override;
  std::unique_ptr<Request> irecv(void* data, size_t bytes, int peer, int tag) override;

  void all_gather(const void* send, size_t bytes, void* recv) override;
  void all_gather_v(const void* send, size_t bytes, void* recv, const std::vector<size_t>& bytes_per_rank) override;
  void all_to_all(const void* send, void* recv, size_t bytes_per_peer) override;
  void all_to_all_v(const void* send, const std::vector<size_t>& send_bytes, void* recv,
                    const std::vector<size_t>& recv_bytes) override;
  void all_reduce(void* data, size_t count, DType dtype, ReduceOp op) override;
  void reduce_scatter(const void* send, void* recv, size_t count_per_rank, DType dtype, ReduceOp op) override;
  void broadcast(void* data, size_t bytes, int root) override;
  void barrier() override;

 private:
  // Posts a send or receive; returns the request that completes when the bytes are copied.
  std::unique_ptr<Request> post(bool is_send, const void* send, void* recv, size_t bytes, int peer, int tag);

  // Collectives: meet() publishes this rank's slot and waits for every rank (a barrier), after which
  // the peers' slots may be read; sync() (another barrier) then ends the reading, so no rank reuses
  // its buffers, or its slot, while others still read them. Every collective ends with a sync().
  const std::vector<Slot>& meet(const Slot& mine, Clock::time_point deadline);
  void sync(const char* operation, Clock::time_point deadline);
  void sync_locked(std::unique_lock<std::mutex>& lock, const char* operation, Clock::time_point deadline);
  Clock::time_point deadline() const { return Clock::now() + timeout(); }

  std::string name_peer(int peer) const;
  void check_peer(int peer, const char* operation) const;
  void check_sizes(const std::vector<size_t>& sizes, const char* operation) const;

  std::shared_ptr<World> world_;
  std::shared_ptr<Group> group_;
  int rank_;
  int world_rank_;
  std::vector<std::byte> scratch_;  // all_reduce partial results, reused across calls
};

}  // namespace cpdit::comm::local
