// KV chunk messages and their rotation around the ring: p2p (double-buffered) or allgather.
#include <cpdit/core/error.hpp>
#include <cpdit/parallel/kv_rotation.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace cpdit::parallel {
namespace {

constexpr int kKvTag = 11;
constexpr size_t kAlign = 64;  // every region of a message starts on a cache line
constexpr size_t kHeaderBytes = kAlign;

size_t round_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Bytes as a tensor, so the buffers are charged to the rank that holds them.
Tensor byte_buffer(size_t bytes) { return Tensor::empty({int64_t(bytes)}, DType::boolean); }

// A typed view of part of a byte buffer; the view keeps the buffer alive.
Tensor region(const Tensor& buffer, size_t offset, const Shape& shape, DType dtype) {
  return Tensor::borrow(static_cast<std::byte*>(buffer.raw()) + offset, shape, dtype,
                        std::make_shared<Tensor>(buffer));
}

struct Header {
  int64_t owner;
  int64_t length;
};

class WaitClock {
 public:
  explicit WaitClock(CommStats& stats) : stats_(stats), start_(std::chrono::steady_clock::now()) {}
  ~WaitClock() {
    stats_.wait_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  CommStats& stats_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

size_t KvRotation::message_bytes(int64_t length) const {
  const size_t tensor = size_t(batch_ * length * heads_ * dim_) * dtype_size(dtype_);
  const size_t mask = masked_ ? size_t(batch_ * length) : 0;
  return kHeaderBytes + 2 * round_up(tensor) + round_up(mask);
}

KvChunk KvRotation::view(const Tensor& buffer, size_t offset, int owner) const {
  Header header;
  std::memcpy(&header, static_cast<const std::byte*>(buffer.raw()) + offset, sizeof header);
  CPDIT_CHECK(header.owner == owner && header.length == length_of(owner), internal,
              "ring: expected KV chunk ", owner, " of length ", length_of(owner), ", received chunk ",
              header.owner, " of length ", header.length);
  const int64_t len = header.length;
  const size_t tensor = round_up(size_t(batch_ * len * heads_ * dim_) * dtype_size(dtype_));
  KvChunk chunk;
  chunk.owner = owner;
  chunk.mask = rule_;
  chunk.k = region(buffer, offset + kHeaderBytes, {batch_, len, heads_, dim_}, dtype_);
  chunk.v = region(buffer, offset + kHeaderBytes + tensor, {batch_, len, heads_, dim_}, dtype_);
  if (masked_) {
    chunk.mask.kind = attention::MaskKind::key_padding;
    chunk.mask.tensor = region(buffer, offset + kHeaderBytes + 2 * tensor, {batch_, len}, DType::boolean);
  }
  return chunk;
}

KvRotation::KvRotation(comm::Communicator& ring, RotateMethod method, const KvChunk& own,
                       CommStats& stats)
    : ring_(ring),
      method_(method),
      stats_(stats),
      size_(ring.size()),
      rank_(ring.rank()),
      batch_(own.k.size(0)),
      heads_(own.k.size(2)),
      dim_(own.k.size(3)),
      dtype_(own.k.dtype()),
      masked_(own.mask.kind == attention::MaskKind::key_padding),
      rule_(own.mask),
      lengths_(size_t(ring.size())) {
  rule_.kind = attention::MaskKind::none;
  rule_.tensor = Tensor();
  // Lengths are exchanged on every call, on every rank alike (no rank-local caches in front of
  // a collective).
  const int64_t mine = own.length();
  {
    WaitClock clock(stats_);
    ring_.all_gather(&mine, sizeof mine, lengths_.data());
  }
  stats_.bytes_sent += int64_t(sizeof mine) * (size_ - 1);

  // Pack the own chunk: header | k | v | mask.
  const size_t own_bytes = message_bytes(mine);
  Tensor packed = byte_buffer(
      method_ == RotateMethod::p2p ? message_bytes(*std::max_element(lengths_.begin(), lengths_.end()))
                                   : own_bytes);
  const Header header{rank_, mine};
  std::memcpy(packed.raw(), &header, sizeof header);
  const size_t tensor = round_up(size_t(batch_ * mine * heads_ * dim_) * dtype_size(dtype_));
  region(packed, kHeaderBytes, own.k.shape(), dtype_).copy_(own.k);
  region(packed, kHeaderBytes + tensor, own.v.shape(), dtype_).copy_(own.v);
  if (masked_) region(packed, kHeaderBytes + 2 * tensor, {batch_, mine}, DType::boolean).copy_(own.mask.tensor);

  if (method_ == RotateMethod::p2p) {
    cur_ = packed;
    if (size_ > 1) nxt_ = byte_buffer(cur_.nbytes());
    stats_.hold_kv(int64_t(cur_.nbytes() + (nxt_.defined() ? nxt_.nbytes() : 0)));
    return;
  }
  std::vector<size_t> bytes(lengths_.size());
  offsets_.resize(lengths_.size());
  size_t total = 0;
  for (int c = 0; c < size_; ++c) {
    bytes[size_t(c)] = message_bytes(lengths_[size_t(c)]);
    offsets_[size_t(c)] = total;
    total += bytes[size_t(c)];
  }
  gathered_ = byte_buffer(total);
  {
    WaitClock clock(stats_);
    ring_.all_gather_v(packed.raw(), own_bytes, gathered_.raw(), bytes);
  }
  stats_.bytes_sent += int64_t(own_bytes) * (size_ - 1);
  stats_.hold_kv(int64_t(total + own_bytes));
}

KvRotation::~KvRotation() = default;

KvChunk KvRotation::begin_step(int i) {
  const int owner = ((rank_ - i) % size_ + size_) % size_;
  if (method_ == RotateMethod::allgather)
    return view(gathered_, offsets_[size_t(owner)], owner);
  if (i < size_ - 1) {
    const int next = (rank_ + 1) % size_, prev = (rank_ - 1 + size_) % size_;
    const int incoming = (owner - 1 + size_) % size_;
    const size_t out_bytes = message_bytes(length_of(owner));
    recv_ = ring_.irecv(nxt_.raw(), message_bytes(length_of(incoming)), prev, kKvTag);
    send_ = ring_.isend(cur_.raw(), out_bytes, next, kKvTag);
    stats_.bytes_sent += int64_t(out_bytes);
  }
  return view(cur_, 0, owner);
}

void KvRotation::end_step(int i) {
  if (method_ == RotateMethod::allgather || i >= size_ - 1) return;
  {
    WaitClock clock(stats_);
    send_->wait();
    recv_->wait();
  }
  send_.reset();
  recv_.reset();
  std::swap(cur_, nxt_);
}

}  // namespace cpdit::parallel
