// The router as models meet it: attention::dispatch sends sharded calls through the bound
// ParallelContext, replicated-KV calls never communicate, the p2p ring holds two KV chunks per
// rank where the all-gather rotation holds them all, and ring chunks a position rule hides are
// never computed.
#include "support/random_normal.hpp"

#include <cpdit/attention/attention.hpp>
#include <cpdit/comm/local.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/parallel/context.hpp>
#include <cpdit/parallel/shard.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <string>

namespace cpdit::parallel {
namespace {

using cpdit::testing::random_normal;

std::shared_ptr<comm::Communicator> borrowed(comm::Communicator& comm) {
  return {&comm, [](comm::Communicator*) {}};
}

ContextParallelConfig degrees(int ring, int ulysses, RotateMethod rotate = RotateMethod::p2p) {
  ContextParallelConfig c;
  c.ring_degree = ring;
  c.ulysses_degree = ulysses;
  c.rotate_method = rotate;
  return c;
}

TEST(Router, DispatchRoutesShardedCallsThroughTheBoundContext) {
  const Tensor q = random_normal({1, 30, 4, 8}, 1), k = random_normal({1, 30, 4, 8}, 2),
               v = random_normal({1, 30, 4, 8}, 3), dout = random_normal({1, 30, 4, 8}, 4);
  attention::ScopedBackend flash("flash");
  const attention::Result ref = attention::dispatch(q, k, v);
  const attention::Grads ref_grads = attention::dispatch_backward(dout, q, k, v, ref);
  comm::run_local(4, [&](comm::Communicator& comm) {
    attention::ScopedBackend rank_flash("flash");
    ParallelContext context(borrowed(comm), degrees(2, 2));
    attention::ScopedRouter bind(&context);
    comm::Communicator& flat = context.mesh().flat();
    const Tensor ql = shard(q, 1, flat), kl = shard(k, 1, flat), vl = shard(v, 1, flat);
    const attention::Result mine = attention::dispatch(ql, kl, vl);
    EXPECT_LE(max_abs_diff(gather(mine.out, 1, flat), ref.out), 1e-5);
    const attention::Grads grads = attention::dispatch_backward(shard(dout, 1, flat), ql, kl, vl, mine);
    EXPECT_LE(max_abs_diff(gather(grads.dk, 1, flat), ref_grads.dk), 1e-5);
    EXPECT_GT(context.stats().bytes_sent, 0);
  });
}

TEST(Router, ReplicatedKeysAttendLocallyWithoutCommunication) {
  // Cross-attention: queries split, the 7 text keys whole on every rank.
  const Tensor q = random_normal({2, 21, 2, 8}, 5), k = random_normal({2, 7, 2, 8}, 6),
               v = random_normal({2, 7, 2, 8}, 7);
  const auto& flash = attention::backend("flash");
  const attention::Result ref = flash.forward(q, k, v, {}, 0.3f);
  comm::run_local(3, [&](comm::Communicator& comm) {
    ParallelContext context(borrowed(comm), degrees(3, 1));
    attention::Options opts;
    opts.scale = 0.3f;
    opts.kv = attention::KvPlacement::replicated;
    const attention::Result mine = context.forward(flash, shard(q, 1, comm), k, v, opts);
    EXPECT_EQ(context.stats().bytes_sent, 0);  // nothing rotated: no keys counted W times
    EXPECT_LE(max_abs_diff(gather(mine.out, 1, comm), ref.out), 1e-6);
  });
}

TEST(Router, P2pRingHoldsTwoChunksWhereAllgatherHoldsAll) {
  const int64_t B = 1, S = 400, H = 2, D = 16;
  const Tensor q = random_normal({B, S, H, D}, 8), k = random_normal({B, S, H, D}, 9),
               v = random_normal({B, S, H, D}, 10);
  const double full_kv = 2.0 * double(k.nbytes());
  for (RotateMethod rotate : {RotateMethod::p2p, RotateMethod::allgather})
    comm::run_local(4, [&](comm::Communicator& comm) {
      ParallelContext context(borrowed(comm), degrees(4, 1, rotate));
      context.forward(attention::backend("flash"), shard(q, 1, comm), shard(k, 1, comm),
                      shard(v, 1, comm), {});
      const double held = double(context.stats().peak_kv_bytes) / full_kv;
      if (rotate == RotateMethod::p2p) {
        EXPECT_NEAR(held, 2.0 / 4, 0.02);
      } else {
        EXPECT_GE(held, 1.0);
      }
    });
}

// Flash, counting the KV chunks it is asked to compute.
class CountingFlash final : public attention::Backend {
 public:
  std::string name() const override { return "counting-flash"; }
  attention::Capabilities capabilities() const override { return flash().capabilities(); }
  attention::Result forward(const Tensor& q, const Tensor& k, const Tensor& v,
                            const attention::Mask& mask, float scale) const override {
    ++forward_calls;
    return flash().forward(q, k, v, mask, scale);
  }
  attention::Grads backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                            const Tensor& out, const Tensor& lse, const attention::Mask& mask,
                            float scale) const override {
    ++backward_calls;
    return flash().backward(dout, q, k, v, out, lse, mask, scale);
  }
  mutable std::atomic<int> forward_calls{0}, backward_calls{0};

 private:
  static const attention::Backend& flash() { return attention::backend("flash"); }
};

// Under a causal rule ring rank r's queries come before every key of chunks r+1 .. W-1: those chunks
// are rotated on (the ring needs them) but never computed, forward and backward.
TEST(Router, RingSkipsChunksTheRuleHides) {
  const Tensor q = random_normal({1, 40, 2, 8}, 11), k = random_normal({1, 40, 2, 8}, 12),
               v = random_normal({1, 40, 2, 8}, 13), dout = random_normal({1, 40, 2, 8}, 14);
  const CountingFlash counting;
  comm::run_local(4, [&](comm::Communicator& comm) {
    ParallelContext context(borrowed(comm), degrees(4, 1));
    attention::Options opts;
    opts.mask = attention::Mask::causal();
    const Tensor ql = shard(q, 1, comm), kl = shard(k, 1, comm), vl = shard(v, 1, comm);
    const attention::Result mine = context.forward(counting, ql, kl, vl, opts);
    context.backward(counting, shard(dout, 1, comm), ql, kl, vl, mine, opts);
  });
  EXPECT_EQ(counting.forward_calls, 1 + 2 + 3 + 4);  // rank r computes chunks 0 .. r
  EXPECT_EQ(counting.backward_calls, 1 + 2 + 3 + 4);
}

TEST(Router, RuleOnReplicatedKeysIsRefused) {
  const Tensor q = random_normal({1, 6, 2, 8}, 15), k = random_normal({1, 7, 2, 8}, 16);
  comm::run_local(2, [&](comm::Communicator& comm) {
    ParallelContext context(borrowed(comm), degrees(2, 1));
    attention::Options opts;
    opts.kv = attention::KvPlacement::replicated;
    opts.mask = attention::Mask::block_causal(3);
    try {
      context.forward(attention::backend("flash"), shard(q, 1, comm), k, k, opts);
      ADD_FAILURE() << "expected a refusal";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("KvPlacement::sharded"), std::string::npos) << e.what();
    }
  });
}

}  // namespace
}  // namespace cpdit::parallel
