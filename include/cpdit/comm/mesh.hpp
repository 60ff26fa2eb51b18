#pragma once
// The (ring, Ulysses) mesh as diffusers lays it out: global rank g = r * U + u. Ulysses groups are
// contiguous ranks {rU, ..., rU + U - 1} (they do the all-to-all and belong on the fastest links);
// ring groups are strided {u, U + u, 2U + u, ...}. Constructing a Mesh is collective on `world`.
#include <cpdit/comm/communicator.hpp>

#include <memory>

namespace cpdit::comm {

class Mesh {
 public:
  // Throws invalid_argument unless ring >= 1, ulysses >= 1 and ring * ulysses == world->size().
  Mesh(std::shared_ptr<Communicator> world, int ring, int ulysses);

  Communicator& flat() { return *flat_; }  // every rank, for splitting and gathering tokens
  Communicator& ring() { return *ring_; }
  Communicator& ulysses() { return *ulysses_; }
  int rank() const { return flat_->rank(); }
  int ring_rank() const { return ring_->rank(); }        // r
  int ulysses_rank() const { return ulysses_->rank(); }  // u
  int ring_degree() const { return ring_->size(); }
  int ulysses_degree() const { return ulysses_->size(); }

 private:
  std::shared_ptr<Communicator> flat_;
  std::shared_ptr<Communicator> ring_;
  std::shared_ptr<Communicator> ulysses_;
};

}  // namespace cpdit::comm
