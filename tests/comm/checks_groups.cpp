// Sub-communicators: split by color and key, and every (cfg, ring, Ulysses) mesh shape that fits the
// world, checking memberships and a collective inside each group.
#include "checks.hpp"

#include <cpdit/comm/mesh.hpp>

#include <memory>

namespace cpdit::comm::testing {

namespace {

// World ranks of the members of `group`, in group-rank order.
std::vector<int> members(Communicator& group, int world_rank) {
  std::vector<int> all(group.size());
  group.all_gather(&world_rank, sizeof(int), all.data());
  return all;
}

// Color = parity; key reverses the order; a negative color joins nothing.
void check_split(Communicator& comm) {
  const int n = comm.size(), me = comm.rank();
  auto half = comm.split(me % 2, n - me);
  std::vector<int> expected;
  for (int p = n - 1; p >= 0; --p)
    if (p % 2 == me % 2) expected.push_back(p);
  COMM_EXPECT(comm, half != nullptr && members(*half, me) == expected);
  COMM_EXPECT(comm, half->engine() == comm.engine() && half->timeout() == comm.timeout());

  // Point-to-point inside the group uses group ranks.
  const int hn = half->size(), hr = half->rank();
  int token = me, got = -1;
  auto sending = half->isend(&token, sizeof token, (hr + 1) % hn, 0);
  half->recv(&got, sizeof got, (hr + hn - 1) % hn, 0);
  sending->wait();
  COMM_EXPECT(comm, got == expected[(hr + hn - 1) % hn]);

  auto only_zero = comm.split(me == 0 ? 0 : -1, 0);
  COMM_EXPECT(comm, (only_zero != nullptr) == (me == 0));
  if (only_zero) COMM_EXPECT(comm, only_zero->size() == 1 && only_zero->rank() == 0);

  // Groups split further, and the parent stays usable.
  auto single = half->split(half->rank(), 0);
  COMM_EXPECT(comm, single->size() == 1);
  comm.barrier();
}

// Every (C, R, U) with C * R * U == N and C in {1, 2}: g = c * (R * U) + r * U + u; CFG groups are
// contiguous blocks of R * U ranks, Ulysses groups contiguous inside them, ring groups strided, and
// the CFG peers the same (r, u) in each group.
void check_mesh_shapes(Communicator& comm) {
  const int n = comm.size(), g = comm.rank();
  // Mesh takes a shared communicator; this one is owned by the caller, so alias it without ownership.
  std::shared_ptr<Communicator> world(std::shared_ptr<Communicator>{}, &comm);
  for (int cfg = 1; cfg <= 2; ++cfg) {
    if (n % cfg != 0) continue;
    const int group = n / cfg;
    for (int ring = 1; ring <= group; ++ring) {
      if (group % ring != 0) continue;
      const int ulysses = group / ring;
      Mesh mesh(world, ring, ulysses, cfg);
      const int c = g / group, r = g % group / ulysses, u = g % ulysses;
      COMM_EXPECT(comm, mesh.rank() == g % group && mesh.ring_rank() == r && mesh.ulysses_rank() == u &&
                            mesh.cfg_rank() == c,
                  "mesh ", cfg, "x", ring, "x", ulysses);
      COMM_EXPECT(comm, mesh.ring_degree() == ring && mesh.ulysses_degree() == ulysses && mesh.cfg_degree() == cfg);
      std::vector<int> ulysses_group, ring_group, flat_group, cfg_group;
      for (int k = 0; k < ulysses; ++k) ulysses_group.push_back(c * group + r * ulysses + k);
      for (int k = 0; k < ring; ++k) ring_group.push_back(c * group + k * ulysses + u);
      for (int k = 0; k < group; ++k) flat_group.push_back(c * group + k);
      for (int k = 0; k < cfg; ++k) cfg_group.push_back(k * group + g % group);
      COMM_EXPECT(comm, members(mesh.ulysses(), g) == ulysses_group, "Ulysses group of mesh ", cfg, "x", ring, "x",
                  ulysses);
      COMM_EXPECT(comm, members(mesh.ring(), g) == ring_group, "ring group of mesh ", cfg, "x", ring, "x", ulysses);
      COMM_EXPECT(comm, members(mesh.flat(), g) == flat_group, "CFG group of mesh ", cfg, "x", ring, "x", ulysses);
      COMM_EXPECT(comm, members(mesh.cfg(), g) == cfg_group, "CFG peers of mesh ", cfg, "x", ring, "x", ulysses);
      COMM_EXPECT(comm, members(mesh.world(), g).size() == size_t(n) && mesh.flat_group().get() == &mesh.flat());

      // A reduction inside each group sums exactly its members.
      int64_t sums[3] = {g, g, g};
      mesh.ulysses().all_reduce(&sums[0], 1, DType::i64, ReduceOp::sum);
      mesh.ring().all_reduce(&sums[1], 1, DType::i64, ReduceOp::sum);
      mesh.cfg().all_reduce(&sums[2], 1, DType::i64, ReduceOp::sum);
      int64_t ulysses_sum = 0, ring_sum = 0, cfg_sum = 0;
      for (int m : ulysses_group) ulysses_sum += m;
      for (int m : ring_group) ring_sum += m;
      for (int m : cfg_group) cfg_sum += m;
      COMM_EXPECT(comm, sums[0] == ulysses_sum && sums[1] == ring_sum && sums[2] == cfg_sum, "mesh ", cfg, "x", ring,
                  "x", ulysses);
    }
  }
  expect_error([&] { Mesh(world, n + 1, 1); }, ErrorKind::invalid_argument,
               {detail::concat("ring=", n + 1), "ulysses=1", detail::concat(n, " ranks")});
  expect_error([&] { Mesh(world, 0, n); }, ErrorKind::invalid_argument, {"ring=0"});
  expect_error([&] { Mesh(world, n, 1, 2); }, ErrorKind::invalid_argument, {"cfg=2", detail::concat(n, " ranks")});
}

}  // namespace

void add_group_checks(std::vector<Check>& checks) {
  checks.push_back({"split", check_split});
  checks.push_back({"mesh_shapes", check_mesh_shapes});
}

}  // namespace cpdit::comm::testing
