// Impossible configurations are refused at setup with a message that names the fix.
#include <cpdit/comm/local.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/parallel/config.hpp>
#include <cpdit/parallel/context.hpp>

#include <gtest/gtest.h>

namespace cpdit::parallel {
namespace {

using attention::MaskKind;

// Expects `fn` to throw cpdit::Error of `kind` whose message contains `fix`.
template <class Fn>
void expect_refused(Fn&& fn, ErrorKind kind, const std::string& fix) {
  try {
    fn();
    ADD_FAILURE() << "accepted; expected an error mentioning '" << fix << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(fix), std::string::npos) << e.what();
  }
}

// A backend that cannot return the LSE (like diffusers' `native`): fine for Ulysses, not for ring.
class NoLseBackend : public attention::Backend {
 public:
  std::string name() const override { return "no_lse"; }
  attention::Capabilities capabilities() const override {
    attention::Capabilities c;
    c.backward = c.key_padding_mask = c.gqa = true;
    c.ring = c.ulysses = c.unified = true;
    c.dtypes = {DType::f32};
    return c;
  }
  attention::Result forward(const Tensor&, const Tensor&, const Tensor&, const attention::Mask&,
                            float) const override {
    return {};
  }
  attention::Grads backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                            const Tensor&, const Tensor&, const attention::Mask&,
                            float) const override {
    return {};
  }
};

ContextParallelConfig degrees(int ring, int ulysses) {
  ContextParallelConfig c;
  c.ring_degree = ring;
  c.ulysses_degree = ulysses;
  return c;
}

const attention::Backend& flash() { return attention::backend("flash"); }

TEST(Validation, DegreesMustBePositiveAndMultiplyToTheGroupSize) {
  expect_refused([] { validate_degrees(degrees(0, 2), 2); }, ErrorKind::invalid_argument,
                 "must both be at least 1");
  expect_refused([] { validate_degrees(degrees(2, 3), 4); }, ErrorKind::invalid_argument,
                 "choose degrees whose product is 4");
  validate_degrees(degrees(2, 2), 4);
}

// A model is parallel over one CFG group: cfg 2 leaves the group's size ring x Ulysses, and only two
// passes (conditional, unconditional) exist to share.
TEST(Validation, CfgDegreeIsOneOrTwoAndOnlyWhereGuidanceRuns) {
  ContextParallelConfig two = degrees(2, 1);
  two.cfg_degree = 2;
  validate_degrees(two, 2);
  EXPECT_EQ(two.world_size(), 4);
  ContextParallelConfig three = two;
  three.cfg_degree = 3;
  expect_refused([&] { validate_degrees(three, 2); }, ErrorKind::invalid_argument, "is not 1 or 2");
  validate_cfg(two, true, "unused");
  validate_cfg(degrees(2, 1), false, "unused");
  expect_refused([&] { validate_cfg(two, false, "this model reads guidance as an embedding"); },
                 ErrorKind::invalid_argument, "this model reads guidance as an embedding");
}

TEST(Validation, ContextRefusesAMeshThatDoesNotFitTheWorld) {
  expect_refused(
      [] {
        comm::run_local(2, [](comm::Communicator& comm) {
          ParallelContext context(std::shared_ptr<comm::Communicator>(&comm, [](auto*) {}),
                                  degrees(1, 3));
        });
      },
      ErrorKind::invalid_argument, "product is 2");
}

TEST(Validation, RingNeedsABackendThatReturnsLse) {
  NoLseBackend no_lse;
  const CallShape call{8, 8, MaskKind::none, DType::f32, false};
  expect_refused([&] { validate_call(degrees(2, 1), no_lse, call); }, ErrorKind::unsupported,
                 "returning the LSE");
  expect_refused([&] { validate_call(degrees(2, 2), no_lse, call); }, ErrorKind::unsupported,
                 "returning the LSE");
  validate_call(degrees(1, 4), no_lse, call);  // Ulysses alone does not merge, so needs no LSE
}

TEST(Validation, OnlyKeyPaddingMasksCanBeSplit) {
  const CallShape call{4, 4, MaskKind::boolean, DType::f32, false};
  expect_refused([&] { validate_call(degrees(2, 1), attention::backend("native"), call); },
                 ErrorKind::unsupported, "pass a key_padding mask");
  validate_call(degrees(1, 1), attention::backend("native"), call);  // no split: the backend decides
}

TEST(Validation, EveryUlyssesRankNeedsARealHead) {
  // H = 6 over U = 4 is served by head padding; 2 KV heads over 4 ranks by copying them; 3 query
  // heads cannot be spread over 4 ranks.
  validate_call(degrees(1, 4), flash(), {6, 6, MaskKind::none, DType::f32, true});
  validate_call(degrees(2, 4), flash(), {8, 2, MaskKind::none, DType::f32, true});
  expect_refused([] { validate_call(degrees(1, 4), flash(), {3, 3, MaskKind::none, DType::f32, true}); },
                 ErrorKind::invalid_argument, "use ulysses_degree <= 3");
  expect_refused([] { validate_call(degrees(1, 3), flash(), {5, 2, MaskKind::none, DType::f32, true}); },
                 ErrorKind::invalid_argument, "multiple of key/value heads");
}

TEST(Validation, UnknownRotateMethodNamesTheChoices) {
  expect_refused([] { parse_rotate_method("alltoall"); }, ErrorKind::invalid_argument,
                 "use p2p or allgather");
  EXPECT_EQ(parse_rotate_method("allgather"), RotateMethod::allgather);
}

}  // namespace
}  // namespace cpdit::parallel
