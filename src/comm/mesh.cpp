#include <cpdit/comm/mesh.hpp>
#include <cpdit/core/error.hpp>

namespace cpdit::comm {

Mesh::Mesh(std::shared_ptr<Communicator> world, int ring, int ulysses) : flat_(std::move(world)) {
  CPDIT_CHECK(flat_ != nullptr, invalid_argument, "Mesh needs a communicator");
  CPDIT_CHECK(ring >= 1 && ulysses >= 1 && int64_t(ring) * ulysses == flat_->size(), invalid_argument,
              "mesh ring=", ring, " x ulysses=", ulysses, " does not match the ", flat_->size(),
              " ranks; choose degrees whose product is ", flat_->size());
  // g = r * U + u
  const int r = flat_->rank() / ulysses;
  const int u = flat_->rank() % ulysses;
  ulysses_ = flat_->split(r, u);
  ring_ = flat_->split(u, r);
}

}  // namespace cpdit::comm
