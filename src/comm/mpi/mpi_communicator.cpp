// The `mpi` engine. Every operation is started non-blocking and polled against the timeout, so a
// silent peer becomes an error instead of a hang.
#include "runtime.hpp"
#include "../reduce.hpp"

#include <cpdit/comm/mpi.hpp>
#include <cpdit/core/error.hpp>

#include <algorithm>
#include <climits>
#include <functional>

namespace cpdit::comm {

namespace {

using mpi::Clock;

// Point-to-point messages above this size travel in chunks (MPI counts are int).
constexpr size_t kChunk = size_t(1) << 30;

int to_int(size_t n, const char* operation) {
  CPDIT_CHECK(n <= size_t(INT_MAX), unsupported, operation, ": ", n,
              " exceeds the 2 GiB count limit of MPI collectives; split the transfer");
  return int(n);
}

std::vector<int> to_ints(const std::vector<size_t>& sizes, const char* operation) {
  std::vector<int> out;
  for (size_t s : sizes) out.push_back(to_int(s, operation));
  return out;
}

// Offsets of blocks laid back to back.
std::vector<int> displacements(const std::vector<int>& counts, const char* operation) {
  std::vector<int> out;
  size_t offset = 0;
  for (int c : counts) {
    out.push_back(to_int(offset, operation));
    offset += size_t(c);
  }
  return out;
}

MPI_Datatype mpi_type(DType dtype) { return dtype == DType::i64 ? MPI_INT64_T : MPI_FLOAT; }
MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::sum ? MPI_SUM : MPI_MAX; }
bool is_half(DType dtype) { return dtype == DType::bf16 || dtype == DType::f16; }

class MpiRequest final : public Request {
 public:
  MpiRequest(std::vector<MPI_Request> requests, std::vector<size_t> expected, std::string what, int rank,
             std::chrono::milliseconds timeout)
      : requests_(std::move(requests)), expected_(std::move(expected)), what_(std::move(what)), rank_(rank),
        timeout_(timeout) {}
  ~MpiRequest() override {
    if (!done_)
      mpi::abandon(requests_, timeout_,
                   "rank " + std::to_string(rank_) + ": " + what_ + " was dropped before it completed");
  }

  void wait() override {
    if (done_) return;
    std::vector<MPI_Status> statuses(requests_.size());
    if (!mpi::wait_all(requests_, statuses.data(), Clock::now() + timeout_)) {
      const std::string message = detail::concat("rank ", rank_, ": ", what_, " timed out after ",
                                                 double(timeout_.count()) / 1000.0,
                                                 " s; raise CPDIT_COMM_TIMEOUT_S if the peers are only slow");
      mpi::abandon(requests_, std::chrono::seconds(1), message);
      done_ = true;
      fail(ErrorKind::timeout, message);
    }
    finish(statuses);
  }

  bool test() override {
    if (done_) return true;
    std::vector<MPI_Status> statuses(requests_.size());
    int complete = 0;
    {
      std::lock_guard lock(mpi::call_mutex());
      mpi::check(MPI_Testall(int(requests_.size()), requests_.data(), &complete, statuses.data()), "MPI_Testall");
    }
    if (complete) finish(statuses);
    return complete;
  }

 private:
  // Receives must have got exactly the bytes they asked for.
  void finish(std::vector<MPI_Status>& statuses) {
    done_ = true;
    for (size_t i = 0; i < expected_.size(); ++i) {
      int count = 0;
      MPI_Get_count(&statuses[i], MPI_BYTE, &count);
      CPDIT_CHECK(size_t(count) == expected_[i], comm, "rank ", rank_, ": ", what_, " got a message of ", count,
                  " bytes; sender and receiver must agree on the size");
    }
  }

  std::vector<MPI_Request> requests_;
  std::vector<size_t> expected_;  // bytes per chunk, for receives
  std::string what_;
  int rank_;
  std::chrono::milliseconds timeout_;
  bool done_ = false;
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, bool owned, CommOptions options) : Communicator(options), comm_(comm), owned_(owned) {
    mpi::check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    mpi::check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
    mpi::check(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_), "MPI_Comm_rank");
  }
  ~MpiCommunicator() override {
    if (owned_ && mpi::active()) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string engine() const override { return "mpi"; }

  std::shared_ptr<Communicator> split(int color, int key) override {
    // MPI_Comm_split blocks without a deadline: meet first under the timeout, so that a missing rank
    // is reported instead of waited for.
    barrier();
    MPI_Comm child = MPI_COMM_NULL;
    {
      std::lock_guard lock(mpi::call_mutex());
      mpi::check(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &child), "MPI_Comm_split");
    }
    if (child == MPI_COMM_NULL) return nullptr;
    return std::make_shared<MpiCommunicator>(child, true, options_);
  }

  void send(const void* data, size_t bytes, int peer, int tag) override { isend(data, bytes, peer, tag)->wait(); }
  void recv(void* data, size_t bytes, int peer, int tag) override { irecv(data, bytes, peer, tag)->wait(); }

  std::unique_ptr<Request> isend(const void* data, size_t bytes, int peer, int tag) override {
    return post(true, const_cast<void*>(data), bytes, peer, tag);
  }
  std::unique_ptr<Request> irecv(void* data, size_t bytes, int peer, int tag) override {
    return post(false, data, bytes, peer, tag);
  }

  void all_gather(const void* send, size_t bytes, void* recv) override {
    int n = to_int(bytes, "all_gather");
    collective("all_gather", [&](MPI_Request* r) {
      return MPI_Iallgather(in_place(send, recv, size_t(rank_) * bytes), n, MPI_BYTE, recv, n, MPI_BYTE, comm_, r);
    });
  }

  void all_gather_v(const void* send, size_t bytes, void* recv, const std::vector<size_t>& bytes_per_rank) override {
    check_sizes(bytes_per_rank, "all_gather_v");
    CPDIT_CHECK(bytes == bytes_per_rank[rank_], invalid_argument, "all_gather_v on rank ", rank_, ": sends ", bytes,
                " bytes but bytes_per_rank says ", bytes_per_rank[rank_]);
    std::vector<int> counts = to_ints(bytes_per_rank, "all_gather_v");
    std::vector<int> offsets = displacements(counts, "all_gather_v");
    collective("all_gather_v", [&](MPI_Request* r) {
      return MPI_Iallgatherv(in_place(send, recv, size_t(offsets[rank_])), int(bytes), MPI_BYTE, recv, counts.data(),
                             offsets.data(), MPI_BYTE, comm_, r);
    });
  }

  void all_to_all(const void* send, void* recv, size_t bytes_per_peer) override {
    int n = to_int(bytes_per_peer, "all_to_all");
    to_int(bytes_per_peer * size_t(size_), "all_to_all");
    collective("all_to_all",
               [&](MPI_Request* r) { return MPI_Ialltoall(send, n, MPI_BYTE, recv, n, MPI_BYTE, comm_, r); });
  }

  void all_to_all_v(const void* send, const std::vector<size_t>& send_bytes, void* recv,
                    const std::vector<size_t>& recv_bytes) override {
    check_sizes(send_bytes, "all_to_all_v");
    check_sizes(recv_bytes, "all_to_all_v");
    std::vector<int> send_counts = to_ints(send_bytes, "all_to_all_v");
    std::vector<int> recv_counts = to_ints(recv_bytes, "all_to_all_v");
    std::vector<int> send_offsets = displacements(send_counts, "all_to_all_v");
    std::vector<int> recv_offsets = displacements(recv_counts, "all_to_all_v");
    collective("all_to_all_v", [&](MPI_Request* r) {
      return MPI_Ialltoallv(send, send_counts.data(), send_offsets.data(), MPI_BYTE, recv, recv_counts.data(),
                            recv_offsets.data(), MPI_BYTE, comm_, r);
    });
  }

  void all_reduce(void* data, size_t count, DType dtype, ReduceOp op) override {
    check_reducible(dtype, "all_reduce");
    int n = to_int(count, "all_reduce");
    if (is_half(dtype)) {  // MPI has no 16-bit floats: reduce in f32, round once
      std::vector<float> wide(count);
      convert(data, dtype, wide.data(), DType::f32, count);
      all_reduce(wide.data(), count, DType::f32, op);
      convert(wide.data(), DType::f32, data, dtype, count);
      return;
    }
    collective("all_reduce", [&](MPI_Request* r) {
      return MPI_Iallreduce(MPI_IN_PLACE, data, n, mpi_type(dtype), mpi_op(op), comm_, r);
    });
  }

  void reduce_scatter(const void* send, void* recv, size_t count_per_rank, DType dtype, ReduceOp op) override {
    check_reducible(dtype, "reduce_scatter");
    int n = to_int(count_per_rank, "reduce_scatter");
    to_int(count_per_rank * size_t(size_), "reduce_scatter");
    if (is_half(dtype)) {
      std::vector<float> wide_send(count_per_rank * size_t(size_)), wide_recv(count_per_rank);
      convert(send, dtype, wide_send.data(), DType::f32, wide_send.size());
      reduce_scatter(wide_send.data(), wide_recv.data(), count_per_rank, DType::f32, op);
      convert(wide_recv.data(), DType::f32, recv, dtype, count_per_rank);
      return;
    }
    collective("reduce_scatter", [&](MPI_Request* r) {
      return MPI_Ireduce_scatter_block(send, recv, n, mpi_type(dtype), mpi_op(op), comm_, r);
    });
  }

  void broadcast(void* data, size_t bytes, int root) override {
    check_peer(root, "broadcast");
    int n = to_int(bytes, "broadcast");
    collective("broadcast", [&](MPI_Request* r) { return MPI_Ibcast(data, n, MPI_BYTE, root, comm_, r); });
  }

  void barrier() override {
    collective("barrier", [&](MPI_Request* r) { return MPI_Ibarrier(comm_, r); });
  }

 private:
  // MPI forbids a send buffer that aliases the receive buffer; that case is MPI_IN_PLACE.
  static const void* in_place(const void* send, void* recv, size_t offset) {
    return send == static_cast<const std::byte*>(recv) + offset ? MPI_IN_PLACE : send;
  }

  // Names the group when it is not the world, since peers are then group ranks.
  std::string where() const {
    return owned_ ? detail::concat(" in a ", size_, "-rank group") : std::string();
  }

  void collective(const char* operation, const std::function<int(MPI_Request*)>& start) {
    std::vector<MPI_Request> request(1, MPI_REQUEST_NULL);
    {
      std::lock_guard lock(mpi::call_mutex());
      mpi::check(start(request.data()), operation);
    }
    if (!mpi::wait_all(request, MPI_STATUSES_IGNORE, Clock::now() + timeout()))
      fail(ErrorKind::timeout, "rank ", world_rank_, ": ", operation, where(), " timed out after ",
           double(timeout().count()) / 1000.0, " s; raise CPDIT_COMM_TIMEOUT_S if the peers are only slow");
  }

  std::unique_ptr<Request> post(bool is_send, void* data, size_t bytes, int peer, int tag) {
    const char* operation = is_send ? "send" : "recv";
    check_peer(peer, operation);
    CPDIT_CHECK(tag >= 0, invalid_argument, operation, " on rank ", world_rank_, ": tag must be >= 0, got ", tag);
    std::vector<MPI_Request> requests;
    std::vector<size_t> expected;
    std::lock_guard lock(mpi::call_mutex());
    size_t offset = 0;
    do {  // at least one message, so that zero-byte messages are matched too
      size_t chunk = std::min(kChunk, bytes - offset);
      void* at = static_cast<std::byte*>(data) + offset;
      MPI_Request r;
      if (is_send) {
        mpi::check(MPI_Isend(at, int(chunk), MPI_BYTE, peer, tag, comm_, &r), "MPI_Isend");
      } else {
        mpi::check(MPI_Irecv(at, int(chunk), MPI_BYTE, peer, tag, comm_, &r), "MPI_Irecv");
        expected.push_back(chunk);
      }
      requests.push_back(r);
      offset += chunk;
    } while (offset < bytes);
    return std::make_unique<MpiRequest>(
        std::move(requests), std::move(expected),
        detail::concat(operation, " of ", bytes, " bytes ", is_send ? "to" : "from", " rank ", peer, " (tag ", tag, ")",
                       where()),
        world_rank_, timeout());
  }

  void check_peer(int peer, const char* operation) const {
    CPDIT_CHECK(peer >= 0 && peer < size_, invalid_argument, operation, " on rank ", world_rank_, ": peer ", peer,
                " is outside the communicator of ", size_, " ranks");
  }

  void check_sizes(const std::vector<size_t>& sizes, const char* operation) const {
    CPDIT_CHECK(int(sizes.size()) == size_, invalid_argument, operation, " on rank ", world_rank_, ": got ",
                sizes.size(), " per-rank sizes for a communicator of ", size_, " ranks");
  }

  MPI_Comm comm_;
  bool owned_;
  int rank_ = 0;
  int size_ = 0;
  int world_rank_ = 0;
};

}  // namespace

std::shared_ptr<Communicator> mpi_world(const CommOptions& options) {
  mpi::ensure_initialized();
  return std::make_shared<MpiCommunicator>(MPI_COMM_WORLD, false, options);
}

}  // namespace cpdit::comm
