#pragma once
// The (cfg, ring, Ulysses) mesh: global rank g = c * (R * U) + r * U + u. A CFG group c is the R x U
// contiguous ranks that run one pass of classifier-free guidance (the conditional or the
// unconditional one) with context parallelism; inside it, Ulysses groups are contiguous ranks
// {rU, ..., rU + U - 1} (they do the all-to-all and belong on the fastest links) and ring groups are
// strided {u, U + u, 2U + u, ...}, as diffusers lays out (ring, Ulysses). The CFG dimension is the
// outermost: its groups exchange one noise prediction per step, the least traffic of the three.
// Constructing a Mesh is collective on `world`.
#include <cpdit/comm/communicator.hpp>

#include <memory>

namespace cpdit::comm {

class Mesh {
 public:
  // Throws invalid_argument unless every degree is >= 1 and cfg * ring * ulysses == world->size().
  Mesh(std::shared_ptr<Communicator> world, int ring, int ulysses, int cfg = 1);

  Communicator& world() { return *world_; }  // every rank of every CFG group
  // This rank's CFG group (ring x Ulysses), for splitting and gathering tokens.
  Communicator& flat() { return *flat_; }
  const std::shared_ptr<Communicator>& flat_group() const { return flat_; }
  Communicator& ring() { return *ring_; }
  Communicator& ulysses() { return *ulysses_; }
  // This rank and its peers at the same (r, u) in the other CFG groups; cfg rank = c.
  Communicator& cfg() { return *cfg_; }
  int rank() const { return flat_->rank(); }  // r * U + u, inside the CFG group
  int ring_rank() const { return ring_->rank(); }        // r
  int ulysses_rank() const { return ulysses_->rank(); }  // u
  int cfg_rank() const { return cfg_->rank(); }          // c
  int ring_degree() const { return ring_->size(); }
  int ulysses_degree() const { return ulysses_->size(); }
  int cfg_degree() const { return cfg_->size(); }

 private:
  std::shared_ptr<Communicator> world_;
  std::shared_ptr<Communicator> flat_;
  std::shared_ptr<Communicator> ring_;
  std::shared_ptr<Communicator> ulysses_;
  std::shared_ptr<Communicator> cfg_;
};

}  // namespace cpdit::comm
