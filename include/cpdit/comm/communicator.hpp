#pragma once
// The one communicator contract. Two engines implement it: `local` (ranks
// are threads of one process, see local.hpp) and `mpi` (Open MPI processes, see mpi.hpp). The shape
// follows MLX's `distributed` group: one small abstract class, one folder per transport.
//
// Rules shared by both engines:
// - Every blocking operation (and Request::wait) gives up after timeout() and throws
//   cpdit::Error(ErrorKind::timeout) naming the operation, the peer and the rank.
// - When any rank fails, pending and later operations on every rank throw cpdit::Error(comm)
//   naming the failed rank ("rank 2 failed: <message>"): nothing hangs.
// - Point-to-point messages between one (source, destination, tag) are matched in order, and a
//   receive must name exactly the byte count that was sent.
// - Collectives are called by every rank of the communicator in the same order; blocks are laid out
//   in rank order. Buffers of different ranks must not overlap.
#include <cpdit/core/dtype.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace cpdit::comm {

// Timeout of every blocking operation: CPDIT_COMM_TIMEOUT_S seconds from the environment (may be
// fractional), else 300 s.
std::chrono::milliseconds default_timeout();

struct CommOptions {
  std::chrono::milliseconds timeout = default_timeout();
};

// A pending isend / irecv. wait() blocks until done (throws on peer failure or timeout); test()
// reports completion without blocking (and throws what wait() would have thrown once it is known).
// Destroying a request that has not completed cancels it if it can (an unmatched local post),
// otherwise waits for it to complete — an MPI send cannot be cancelled — and ends the job if it does
// not within timeout(); it never throws. The buffers must stay alive until then, and are free after.
class Request {
 public:
  virtual ~Request();
  virtual void wait() = 0;
  virtual bool test() = 0;
};

enum class ReduceOp { sum, max };
const char* reduce_op_name(ReduceOp op);

class Communicator {
 public:
  virtual ~Communicator();
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string engine() const = 0;  // "local" | "mpi"

  // Collective: ranks passing the same color form a new communicator, ordered by (key, old rank).
  // A negative color returns nullptr (the rank joins no group). The child inherits timeout().
  virtual std::shared_ptr<Communicator> split(int color, int key) = 0;

  // Point-to-point on bytes.
  virtual void send(const void* data, size_t bytes, int peer, int tag = 0) = 0;
  virtual void recv(void* data, size_t bytes, int peer, int tag = 0) = 0;
  virtual std::unique_ptr<Request> isend(const void* data, size_t bytes, int peer, int tag = 0) = 0;
  virtual std::unique_ptr<Request> irecv(void* data, size_t bytes, int peer, int tag = 0) = 0;

  // Collectives on bytes.
  // recv holds size() * bytes: rank r's block at r * bytes.
  virtual void all_gather(const void* send, size_t bytes, void* recv) = 0;
  // Rank r sends bytes_per_rank[r] (== bytes on that rank); recv holds the blocks back to back.
  virtual void all_gather_v(const void* send, size_t bytes, void* recv,
                            const std::vector<size_t>& bytes_per_rank) = 0;
  // send holds size() blocks of bytes_per_peer (block p goes to rank p); recv likewise by source.
  virtual void all_to_all(const void* send, void* recv, size_t bytes_per_peer) = 0;
  // send_bytes[p] bytes go to rank p, recv_bytes[p] come from rank p; blocks contiguous in rank
  // order on both sides. recv_bytes[p] must equal what rank p sends here.
  virtual void all_to_all_v(const void* send, const std::vector<size_t>& send_bytes, void* recv,
                            const std::vector<size_t>& recv_bytes) = 0;
  // In place over `count` elements. dtypes f32, bf16, f16 (accumulated in f32, rounded once) and
  // i64. Every rank gets bitwise the same result.
  virtual void all_reduce(void* data, size_t count, DType dtype, ReduceOp op) = 0;
  // send holds size() * count_per_rank elements; recv gets the reduction of block rank().
  virtual void reduce_scatter(const void* send, void* recv, size_t count_per_rank, DType dtype,
                              ReduceOp op) = 0;
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  virtual void barrier() = 0;

  std::chrono::milliseconds timeout() const { return options_.timeout; }
  void set_timeout(std::chrono::milliseconds timeout) { options_.timeout = timeout; }

 protected:
  explicit Communicator(CommOptions options) : options_(options) {}
  CommOptions options_;
};

}  // namespace cpdit::comm
