#pragma once
// How ring attention makes every KV chunk visit every rank of the ring.
//
// A chunk is one rank's keys, values, key mask and length, packed into one contiguous message, so
// the mask always travels with its keys and uneven lengths need no padding on the wire;
// where the keys sit in the global sequence follows from the owner and the token layout. At step
// i rank r holds chunk (r - i) mod W: with p2p the chunk just arrived from the previous rank; with
// allgather every chunk was gathered up front and is indexed.
#include <cpdit/attention/attention.hpp>
#include <cpdit/comm/communicator.hpp>
#include <cpdit/parallel/config.hpp>

#include <algorithm>
#include <memory>
#include <vector>

namespace cpdit::parallel {

// What the communication of one rank cost, accumulated over calls until reset.
struct CommStats {
  double wait_seconds = 0;       // blocked in waits and collectives (communication not hidden)
  int64_t bytes_sent = 0;        // point-to-point and collective payload sent by this rank
  // Largest KV working set held at once: the Ulysses-exchanged k, v plus the ring's chunk buffers
  // (p2p) or gathered chunks (allgather). The caller's own k, v are not counted.
  int64_t peak_kv_bytes = 0;
  int64_t kv_bytes_held = 0;  // held now by an enclosing stage (the Ulysses exchange)

  void hold_kv(int64_t bytes) { peak_kv_bytes = std::max(peak_kv_bytes, kv_bytes_held + bytes); }
  void reset() { *this = {}; }
};

struct KvChunk {
  int owner = 0;          // ring rank whose keys these are
  Tensor k, v;            // (B, len, H_kv, D), dtype of the inputs
  // The call's mask for these keys: key_padding (B, len) or none, and the position rule (its
  // offsets are set per call by the ring, from the layout).
  attention::Mask mask;

  int64_t length() const { return k.size(1); }
};

class KvRotation {
 public:
  // Collective over `ring`: exchanges every rank's chunk length, and with allgather the chunks.
  KvRotation(comm::Communicator& ring, RotateMethod method, const KvChunk& own, CommStats& stats);
  ~KvRotation();
  KvRotation(const KvRotation&) = delete;
  KvRotation& operator=(const KvRotation&) = delete;

  int steps() const { return size_; }
  int64_t length_of(int owner) const { return lengths_[size_t(owner)]; }

  // The chunk held at step i, owner (rank - i) mod W. With p2p this also starts sending it on to the
  // next rank and receiving the next step's chunk from the previous one, so the transfer overlaps
  // the caller's compute. The returned tensors are valid until end_step(i).
  KvChunk begin_step(int i);
  // p2p: waits for the transfer begun by begin_step(i) (the wait is counted in stats).
  void end_step(int i);

 private:
  KvChunk view(const Tensor& buffer, size_t offset, int owner) const;
  size_t message_bytes(int64_t length) const;

  comm::Communicator& ring_;
  RotateMethod method_;
  CommStats& stats_;
  int size_, rank_;
  int64_t batch_, heads_, dim_;
  DType dtype_;
  bool masked_;                      // the chunks carry key padding
  attention::Mask rule_;             // the position rule of every chunk
  std::vector<int64_t> lengths_;
  Tensor cur_, nxt_;                // p2p: the chunk held now and the one arriving
  Tensor gathered_;                 // allgather: every chunk, back to back in ring order
  std::vector<size_t> offsets_;     // allgather: where chunk c starts in gathered_
  std::unique_ptr<comm::Request> send_, recv_;
};

}  // namespace cpdit::parallel
