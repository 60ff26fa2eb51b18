#include <cpdit/comm/mesh.hpp>
#include <cpdit/core/error.hpp>

namespace cpdit::comm {

Mesh::Mesh(std::shared_ptr<Communicator> world, int ring, int ulysses, int cfg) : world_(std::move(world)) {
  CPDIT_CHECK(world_ != nullptr, invalid_argument, "Mesh needs a communicator");
  CPDIT_CHECK(ring >= 1 && ulysses >= 1 && cfg >= 1 && int64_t(cfg) * ring * ulysses == world_->size(),
              invalid_argument, "mesh cfg=", cfg, " x ring=", ring, " x ulysses=", ulysses, " does not match the ",
              world_->size(), " ranks; choose degrees whose product is ", world_->size());
  // g = c * (R * U) + r * U + u
  const int group = ring * ulysses;
  const int c = world_->rank() / group, in_group = world_->rank() % group;
  const int r = in_group / ulysses, u = in_group % ulysses;
  flat_ = cfg == 1 ? world_ : world_->split(c, in_group);
  cfg_ = world_->split(in_group, c);
  ulysses_ = flat_->split(r, u);
  ring_ = flat_->split(u, r);
}

}  // namespace cpdit::comm
