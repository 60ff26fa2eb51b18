#pragma once
// Records what every module of a tree returns during forward, by module path: "blocks.0" for a
// single result, "pos_embed.0", "pos_embed.1" for several — the names the fixtures' intermediates use.
#include <cpdit/nn/module.hpp>

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <string>

namespace cpdit::testing {

using Recorded = std::shared_ptr<std::map<std::string, Tensor>>;

inline Recorded record_outputs(nn::Module& root) {
  auto seen = std::make_shared<std::map<std::string, Tensor>>();
  for (auto& [path, module] : root.named_modules()) {
    module->add_post_hook("record", [seen, at = path](std::vector<Tensor>& out) {
      if (out.size() == 1) (*seen)[at] = out[0].clone();
      for (size_t i = 0; out.size() > 1 && i < out.size(); ++i) (*seen)[at + "." + std::to_string(i)] = out[i].clone();
    });
  }
  return seen;
}

// Runs `forward` with every module's output recorded, then checks each tensor of `expected` by
// module path: recorded, of the same shape, and error(got, want) below `tolerance`.
inline void expect_intermediates(nn::Module& root, const std::function<void()>& forward,
                                 const std::map<std::string, Tensor>& expected,
                                 const std::function<double(const Tensor&, const Tensor&)>& error, double tolerance) {
  const Recorded recorded = record_outputs(root);
  forward();
  for (const auto& [name, want] : expected) {
    ASSERT_TRUE(recorded->count(name)) << "no module output " << name;
    const Tensor& got = recorded->at(name);
    ASSERT_EQ(got.shape(), want.shape()) << name;
    EXPECT_LT(error(got, want), tolerance) << name;
  }
}

// A model's sample against the fixture's: of the same shape, and error(sample, expected) below `tolerance`.
inline void expect_sample(const Tensor& sample, const Tensor& expected,
                          const std::function<double(const Tensor&, const Tensor&)>& error, double tolerance) {
  ASSERT_EQ(sample.shape(), expected.shape());
  EXPECT_LT(error(sample, expected), tolerance);
}

}  // namespace cpdit::testing
