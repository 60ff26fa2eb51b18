// Plans installed as hooks: which tensors are split or gathered, and the refusals (expected_dims,
// unknown paths and arguments). The exchange here plays rank 0 of 2 without communication.
#include <cpdit/core/error.hpp>
#include <cpdit/nn/layers.hpp>
#include <cpdit/nn/load.hpp>
#include <cpdit/nn/plan_hooks.hpp>

#include <gtest/gtest.h>

namespace cpdit::nn {
namespace {

using parallel::ContextParallelInput;
using parallel::ContextParallelOutput;
using parallel::ContextParallelPlan;
using parallel::ModulePlan;

// Forward takes x and an optional t, passes x through `blocks.*` and `proj`, returns (proj(x), t).
class Toy : public Module {
 public:
  Toy() : blocks(add_module<ModuleList<Linear>>("blocks")), proj(add_module<Linear>("proj", 2, 2)) {
    blocks.append(2, 2);
    blocks.append(2, 2);
    StateDict s;
    for (auto& [name, p] : named_parameters())
      s[name] = name.ends_with("weight") ? Tensor::from_vector({1, 0, 0, 1}, {2, 2}) : Tensor::zeros({2});
    load_state_dict(*this, s);
  }
  std::vector<Tensor> forward(const Tensor& x, const Tensor& t = {}) const {
    return with_hooks({{"x", x}, {"t", t}}, [&](const TensorMap& in) {
      seen_x_rows = in.at("x").size(1);
      Tensor h = in.at("x");
      for (Linear* b : blocks) h = b->forward(h);
      return std::vector<Tensor>{proj.forward(h), in.at("t")};
    });
  }
  ModuleList<Linear>& blocks;
  Linear& proj;
  mutable int64_t seen_x_rows = 0;
};

TokenExchange rank0_of_2() {
  return {[](const Tensor& t, int dim) { return split(t, dim, 2)[0].contiguous(); },
          [](const Tensor& t, int dim) { return cat({t, t}, dim); }};
}

ModulePlan split_inputs(std::map<std::string, ContextParallelInput> inputs) {
  ModulePlan p;
  p.inputs = std::move(inputs);
  return p;
}

Tensor tokens(int64_t n) { return Tensor::zeros({1, n, 2}); }

TEST(PlanHooks, SplitsInputsAtTheRootAndGathersTheOutput) {
  Toy toy;
  ModulePlan gather;
  gather.gathers = {{0, ContextParallelOutput{1, 3}}};
  install_plan(toy, {{"", split_inputs({{"x", {1, 3}}})}, {"proj", gather}}, rank0_of_2());
  auto out = toy.forward(tokens(7));
  EXPECT_EQ(toy.seen_x_rows, 4);      // tensor_split: rank 0 of 2 keeps 4 of 7
  EXPECT_EQ(out[0].size(1), 8);       // the fake gather doubles the local part
  remove_plan(toy);
  EXPECT_EQ(toy.forward(tokens(7))[0].size(1), 7);
}

TEST(PlanHooks, WrongRankIsAnErrorNotASilentSkip) {
  Toy toy;
  install_plan(toy, {{"", split_inputs({{"x", {1, 3}}})}}, rank0_of_2());
  try {
    toy.forward(Tensor::zeros({1, 1, 7, 2}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 'x' of the model is f32(1, 1, 7, 2) with 4 dims"), std::string::npos)
        << e.what();
  }
}

TEST(PlanHooks, OptionalEntryAppliesOnlyToTheExpectedRank) {
  Toy toy;
  ContextParallelInput per_token{1, 2};
  per_token.optional = true;
  install_plan(toy, {{"", split_inputs({{"t", per_token}})}}, rank0_of_2());
  EXPECT_EQ(toy.forward(tokens(4), Tensor::zeros({1, 6}))[1].size(1), 3);  // (B, S): split
  EXPECT_EQ(toy.forward(tokens(4), Tensor::zeros({1}))[1].size(0), 1);     // (B,): whole
  EXPECT_FALSE(toy.forward(tokens(4))[1].defined());                       // not passed: untouched
}

TEST(PlanHooks, WildcardReachesEveryListElementAndOutputsSplitAfterForward) {
  Toy toy;
  ModulePlan split_out;
  ContextParallelInput out_spec{1, 3};
  out_spec.split_output = true;
  split_out.outputs = {{0, out_spec}};
  int calls = 0;
  install_plan(toy, {{"blocks.*", split_out}}, rank0_of_2());
  toy.blocks[1].add_pre_hook("count", [&](TensorMap& in) {
    ++calls;
    EXPECT_EQ(in.at("input").size(1), 4);  // block 0's output, already split 8 -> 4
  });
  EXPECT_EQ(toy.forward(tokens(8))[0].size(1), 2);  // split again after block 1
  EXPECT_EQ(calls, 1);
}

TEST(PlanHooks, RefusesPlansThatDoNotFitTheModel) {
  Toy toy;
  EXPECT_THROW(install_plan(toy, {{"blocks.9", split_inputs({{"input", {1, 3}}})}}, rank0_of_2()), Error);
  EXPECT_THROW(install_plan(toy, {{"*.*", split_inputs({{"input", {1, 3}}})}}, rank0_of_2()), Error);
  ContextParallelInput flagged{1, 3};
  flagged.split_output = true;
  EXPECT_THROW(install_plan(toy, {{"", split_inputs({{"x", flagged}})}}, rank0_of_2()), Error);
  ModulePlan unflagged;
  unflagged.outputs = {{0, ContextParallelInput{1, 3}}};
  EXPECT_THROW(install_plan(toy, {{"proj", unflagged}}, rank0_of_2()), Error);

  install_plan(toy, {{"", split_inputs({{"hidden", {1, 3}}})}}, rank0_of_2());
  EXPECT_THROW(toy.forward(tokens(4)), Error);  // the forward takes no 'hidden'
}

}  // namespace
}  // namespace cpdit::nn
