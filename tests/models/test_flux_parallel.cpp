// FLUX under context parallelism equals the single-rank sample (and on the fixture's inputs
// diffusers' sample): every (ring, Ulysses) layout, both ring rotations, token counts that do not
// divide; and backends that cannot serve a mode are refused
// in either call order.
#include "models/flux_fixture.hpp"

#include <cpdit/comm/local.hpp>
#include <cpdit/core/error.hpp>

#include <gtest/gtest.h>


namespace cpdit::models::flux {
namespace {

using parallel::ContextParallelConfig;
using parallel::RotateMethod;

std::shared_ptr<comm::Communicator> borrow(comm::Communicator& c) {
  return std::shared_ptr<comm::Communicator>(&c, [](comm::Communicator*) {});
}

comm::LocalOptions one_thread_per_rank() {
  comm::LocalOptions options;
  options.threads_per_rank = 1;
  return options;
}

// Rank 0's sample after a forward on ring x ulysses thread ranks (every rank holds the whole output).
Tensor parallel_sample(const FluxCheckpoint& ck, const nn::TensorMap& inputs, int ring, int ulysses,
                       RotateMethod rotate) {
  ContextParallelConfig config;
  config.ring_degree = ring;
  config.ulysses_degree = ulysses;
  config.rotate_method = rotate;
  Tensor sample;
  // run_local's per-rank memory counters end with it: the copy that outlives it is charged here.
  MemoryCounter& caller = current_memory_counter();
  comm::run_local(ring * ulysses, [&](comm::Communicator& c) {
    auto model = load_flux(ck);
    model->enable_parallelism(borrow(c), config);
    Tensor out = model->forward(inputs).at("sample");
    if (c.rank() != 0) return;
    ScopedMemoryCounter charge_caller(caller);
    sample = out.clone();
  }, one_thread_per_rank());
  return sample;
}

struct Layout {
  int ring, ulysses;
};

TEST(FluxParallel, EveryLayoutMatchesOneRank) {
  FluxCheckpoint ck = testing::fixture_checkpoint();
  // The fixture (16 image + 8 text tokens) and a 5x7 grid with 9 text tokens, which divides by none
  // of the group sizes.
  std::vector<nn::TensorMap> cases{testing::fixture_inputs(), testing::random_inputs(ck.config, 5, 7, 9, 7)};
  // The fixture's sample, from diffusers: within test_flux.cpp's one-rank tolerance of it.
  const Tensor diffusers = io::load_safetensors(testing::fixture_dir() + "/expected.safetensors").at("sample");
  constexpr double kFixtureTolerance = 1e-4;
  for (const auto& inputs : cases) {
    const bool fixture = &inputs == &cases.front();
    Tensor want = load_flux(ck)->forward(inputs).at("sample");
    for (Layout l : {Layout{2, 1}, Layout{1, 2}, Layout{2, 2}, Layout{3, 1}, Layout{4, 1}}) {
      for (RotateMethod rotate : {RotateMethod::p2p, RotateMethod::allgather}) {
        if (l.ring == 1 && rotate == RotateMethod::allgather) continue;  // no ring to rotate
        Tensor got = parallel_sample(ck, inputs, l.ring, l.ulysses, rotate);
        ASSERT_EQ(got.shape(), want.shape());
        EXPECT_LT(max_abs_diff(got, want), 1e-5) << "ring " << l.ring << " ulysses " << l.ulysses << " rotate "
                                                 << parallel::rotate_method_name(rotate) << " tokens "
                                                 << inputs.at("hidden_states").size(1);
        if (fixture) {
          EXPECT_LT(max_abs_diff(got, diffusers), kFixtureTolerance)
              << "against diffusers: ring " << l.ring << " ulysses " << l.ulysses << " rotate "
              << parallel::rotate_method_name(rotate);
        }
      }
    }
  }
}

TEST(FluxParallel, DeprecatedBatchedIdsAreRefusedNotLeftUnsplit) {
  FluxCheckpoint ck = testing::fixture_checkpoint();
  auto inputs = testing::fixture_inputs();
  inputs["img_ids"] = inputs["img_ids"].reshape({1, 16, 3});
  EXPECT_THROW(parallel_sample(ck, inputs, 2, 1, RotateMethod::p2p), Error);
}

// A backend that serves Ulysses but returns no LSE, so it cannot serve ring or unified attention.
class UlyssesOnly : public attention::Backend {
 public:
  std::string name() const override { return "test_ulysses_only"; }
  attention::Capabilities capabilities() const override {
    attention::Capabilities c = attention::backend("native").capabilities();
    c.returns_lse = c.ring = c.unified = false;
    return c;
  }
  attention::Result forward(const Tensor& q, const Tensor& k, const Tensor& v, const attention::Mask& mask,
                            float scale) const override {
    return attention::backend("native").forward(q, k, v, mask, scale);
  }
  attention::Grads backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                            const Tensor& lse, const attention::Mask& mask, float scale) const override {
    return attention::backend("native").backward(dout, q, k, v, out, lse, mask, scale);
  }
};

TEST(FluxParallel, BackendThatCannotServeTheModeIsRefusedInEitherOrder) {
  // The registry is process-wide and refuses a second registration: register once, so the test
  // also passes when gtest repeats it.
  static const bool registered = (attention::register_backend(std::make_shared<UlyssesOnly>()), true);
  ASSERT_TRUE(registered);
  FluxCheckpoint ck = testing::fixture_checkpoint();
  ContextParallelConfig ring;
  ring.ring_degree = 2;
  ContextParallelConfig ulysses;
  ulysses.ulysses_degree = 2;
  auto inputs = testing::fixture_inputs();
  Tensor want = load_flux(ck)->forward(inputs).at("sample");
  comm::run_local(2, [&](comm::Communicator& c) {
    auto backend_first = load_flux(ck);
    backend_first->set_attention_backend("test_ulysses_only");
    EXPECT_THROW(backend_first->enable_parallelism(borrow(c), ring), Error);
    EXPECT_FALSE(backend_first->parallel_enabled());

    auto parallel_first = load_flux(ck);
    parallel_first->enable_parallelism(borrow(c), ring);
    EXPECT_THROW(parallel_first->set_attention_backend("test_ulysses_only"), Error);
    EXPECT_LT(max_abs_diff(parallel_first->forward(inputs).at("sample"), want), 1e-5);  // still on the default backend

    // The mode it can serve is accepted and exact.
    backend_first->enable_parallelism(borrow(c), ulysses);
    EXPECT_LT(max_abs_diff(backend_first->forward(inputs).at("sample"), want), 1e-5);
  }, one_thread_per_rank());
}

}  // namespace
}  // namespace cpdit::models::flux
