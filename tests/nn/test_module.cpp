// The module tree: dotted names, parameter binding with one combined error, dtype handling, hooks.
#include <cpdit/core/error.hpp>
#include <cpdit/core/memory.hpp>
#include <cpdit/core/weight.hpp>
#include <cpdit/nn/layers.hpp>
#include <cpdit/nn/load.hpp>

#include <gtest/gtest.h>

namespace cpdit::nn {
namespace {

class Block : public Module {
 public:
  Block() : to_q(add_module<Linear>("to_q", 4, 3)), norm(add_module<RMSNorm>("norm", 3, 1e-6f)) {}
  Linear& to_q;
  RMSNorm& norm;
};

class Toy : public Module {
 public:
  Toy() : blocks(add_module<ModuleList<Block>>("blocks")), out(add_module<Linear>("out", 3, 2, false)) {
    blocks.append();
    blocks.append();
  }
  ModuleList<Block>& blocks;
  Linear& out;
};

StateDict full_state(Toy& toy) {
  StateDict s;
  float v = 0.25f;
  for (auto& [name, p] : toy.named_parameters()) {
    s[name] = Tensor::full(p->shape, v);
    v += 0.25f;
  }
  return s;
}

TEST(Module, NamesFollowTheTree) {
  Toy toy;
  std::vector<std::string> modules, params;
  for (auto& [name, m] : toy.named_modules()) modules.push_back(name);
  for (auto& [name, p] : toy.named_parameters()) params.push_back(name);
  EXPECT_EQ(modules, (std::vector<std::string>{"", "blocks", "blocks.0", "blocks.0.to_q", "blocks.0.norm", "blocks.1",
                                               "blocks.1.to_q", "blocks.1.norm", "out"}));
  EXPECT_EQ(params, (std::vector<std::string>{"blocks.0.to_q.bias", "blocks.0.to_q.weight", "blocks.0.norm.weight",
                                              "blocks.1.to_q.bias", "blocks.1.to_q.weight", "blocks.1.norm.weight",
                                              "out.weight"}));
  EXPECT_EQ(toy.find("blocks.1.to_q"), &toy.blocks[1].to_q);
  EXPECT_EQ(toy.find("blocks.2"), nullptr);
}

TEST(Load, ReportsMissingUnexpectedAndMisshapedTogether) {
  Toy toy;
  StateDict s = full_state(toy);
  s.erase("blocks.0.to_q.bias");
  s.erase("out.weight");
  s["blocks.7.to_q.weight"] = Tensor::zeros({3, 4});
  s["blocks.1.norm.weight"] = Tensor::zeros({5});
  try {
    load_state_dict(toy, s);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("2 missing (blocks.0.to_q.bias, out.weight)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("1 unexpected (blocks.7.to_q.weight)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("1 wrongly shaped (blocks.1.norm.weight: expected (3), got (5))"), std::string::npos) << msg;
  }
  // Nothing was bound by the failed load.
  EXPECT_FALSE(toy.out.named_parameters()[0].second->value.defined());
}

// A state dict with a bf16 Linear weight and an f16 norm weight (0.25 steps are exact in both).
StateDict half_state(Toy& toy) {
  StateDict s = full_state(toy);
  s["blocks.0.to_q.weight"] = s["blocks.0.to_q.weight"].values().to(DType::bf16);
  s["blocks.0.norm.weight"] = s["blocks.0.norm.weight"].values().to(DType::f16);
  return s;
}

TEST(Load, KeepsEveryTensorAsStoredByDefault) {
  Toy toy;
  StateDict s = half_state(toy);
  load_state_dict(toy, s);
  for (auto& [name, p] : toy.named_parameters()) {
    EXPECT_EQ(p->value.dtype(), s[name].dtype()) << name;
    EXPECT_TRUE(p->value.values().same_storage(s[name].values())) << name << " was copied";
  }
}

TEST(Load, F32WidensEveryTensorAndBf16NarrowsOnlyLinearWeights) {
  Toy widened;
  StateDict s = half_state(widened);
  load_state_dict(widened, s, load_options("f32"));
  for (auto& [name, p] : widened.named_parameters()) {
    EXPECT_EQ(p->value.dtype(), DType::f32) << name;
    EXPECT_EQ(max_abs_diff(p->value.values(), s[name].values()), 0.0) << name;
  }
  EXPECT_TRUE(widened.out.named_parameters()[0].second->value.values().same_storage(s["out.weight"].values()));

  Toy narrowed;
  load_state_dict(narrowed, s, load_options("bf16"));
  EXPECT_EQ(narrowed.blocks[1].to_q.named_parameters()[1].second->value.dtype(), DType::bf16);  // weight
  EXPECT_EQ(narrowed.blocks[1].to_q.named_parameters()[0].second->value.dtype(), DType::f32);   // bias, as stored
  EXPECT_EQ(narrowed.blocks[0].norm.named_parameters()[0].second->value.dtype(), DType::f16);   // as stored
  EXPECT_THROW(load_options("f16"), Error);
}

int64_t state_bytes(const StateDict& s) {
  int64_t total = 0;
  for (const auto& [name, t] : s) total += int64_t(t.nbytes());
  return total;
}

TEST(Load, SharedWeightsAreCountedOnceAndOnNoRank) {
  const int64_t before = weight_memory_counter().current();
  MemoryCounter rank;
  ScopedMemoryCounter as_rank(rank);
  {
    Toy shape;
    StateDict s = half_state(shape);
    const int64_t rank_before = rank.current();
    // Two replicas (ranks as threads) bind the same tensors: counted once, on the weight counter.
    Toy a, b;
    load_state_dict(a, s);
    load_state_dict(b, s);
    EXPECT_EQ(weight_memory_counter().current() - before, state_bytes(s));
    EXPECT_EQ(rank.current(), rank_before - state_bytes(s)) << "the state's bytes moved off the rank";
    // Each replica converting for itself holds its own copy, and the count shows it.
    Toy c, d;
    load_state_dict(c, s, load_options("f32"));
    load_state_dict(d, s, load_options("f32"));
    const int64_t widened = 2 * (3 * 4 + 3) * 4;  // block 0's to_q.weight (3 x 4) and norm.weight (3), f32
    EXPECT_EQ(weight_memory_counter().current() - before, state_bytes(s) + widened);
  }
  EXPECT_EQ(weight_memory_counter().current(), before) << "freed weights are credited back";
}

TEST(Load, RefusesNonFloatTensors) {
  Toy toy;
  StateDict s = full_state(toy);
  s["out.weight"] = Tensor::zeros({2, 3}, DType::i64);
  EXPECT_THROW(load_state_dict(toy, s), Error);
}

TEST(Hooks, SeeArgumentsByNameAndResultsByIndexAndCanBeRemoved) {
  Linear lin(2, 2);
  StateDict s{{"weight", Tensor::from_vector({1, 0, 0, 1}, {2, 2})}, {"bias", Tensor::zeros({2})}};
  load_state_dict(lin, s);
  std::vector<std::string> seen;
  lin.add_pre_hook("test", [&](TensorMap& in) {
    seen.push_back("pre:" + in.at("input").describe());
    in["input"] = Tensor::from_vector({3, 4}, {1, 2});  // a hook may replace an argument
  });
  lin.add_post_hook("test", [&](std::vector<Tensor>& out) { seen.push_back("post:" + out[0].describe()); });
  Tensor y = lin.forward(Tensor::zeros({5, 2}));
  EXPECT_EQ(seen, (std::vector<std::string>{"pre:f32(5, 2)", "post:f32(1, 2)"}));
  EXPECT_EQ(y.data<float>()[1], 4.0f);
  lin.remove_hooks("test");
  EXPECT_EQ(lin.forward(Tensor::zeros({5, 2})).size(0), 5);
  EXPECT_EQ(seen.size(), 2u);
}

// An around hook stands between the pre- and post-hooks: it may run the body on the (pre-hooked)
// inputs or return outputs of its own, which the post-hooks then see; a later one wraps an earlier.
TEST(Hooks, AroundHooksRunTheBodyOrStandInForIt) {
  Linear lin(2, 2);
  StateDict s{{"weight", Tensor::from_vector({1, 0, 0, 1}, {2, 2})}, {"bias", Tensor::zeros({2})}};
  load_state_dict(lin, s);
  std::vector<std::string> seen;
  bool run_body = true;
  lin.add_pre_hook("test", [&](TensorMap& in) { in["input"] = Tensor::from_vector({3, 4}, {1, 2}); });
  lin.add_around_hook("test", [&](const TensorMap& in, const Module::Body& body) {
    seen.push_back("inner:" + in.at("input").describe());
    return run_body ? body(in) : std::vector<Tensor>{Tensor::full({1, 2}, 7.0)};
  });
  lin.add_around_hook("outer", [&](const TensorMap& in, const Module::Body& body) {
    seen.push_back("outer");
    return body(in);
  });
  lin.add_post_hook("test", [&](std::vector<Tensor>& out) {
    seen.push_back("post:" + std::to_string(out[0].data<float>()[1]));
  });
  EXPECT_TRUE(lin.has_hooks());
  EXPECT_EQ(lin.forward(Tensor::zeros({5, 2})).data<float>()[1], 4.0f);
  run_body = false;
  EXPECT_EQ(lin.forward(Tensor::zeros({5, 2})).data<float>()[1], 7.0f);
  EXPECT_EQ(seen, (std::vector<std::string>{"outer", "inner:f32(1, 2)", "post:4.000000", "outer", "inner:f32(1, 2)",
                                            "post:7.000000"}));
  lin.remove_hooks("test");
  lin.remove_hooks("outer");
  EXPECT_FALSE(lin.has_hooks());
  EXPECT_EQ(lin.forward(Tensor::zeros({5, 2})).size(0), 5);
}

}  // namespace
}  // namespace cpdit::nn
