#pragma once
// `cpdit forward` on a fixture folder (weights.safetensors, config.json, inputs.safetensors) on one
// rank, under ring x Ulysses 2 x 2, and on a ring of 3 rotated by all-gather: the written `sample`
// must be within `tolerance` of `want` by `error` each time.
#include "support/run_cli.hpp"

#include <cpdit/io/safetensors.hpp>

#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace cpdit::testing {

inline void expect_forward_cli_sample(const std::string& fixture, const Tensor& want,
                                      const std::function<double(const Tensor&, const Tensor&)>& error,
                                      double tolerance) {
  TempDir dir("forward_cli");
  for (std::string layout : {"", " --ring 2 --ulysses 2", " --ring 3 --rotate allgather"}) {
    const std::string out = dir.file("sample.safetensors");
    auto r = run_cli("forward --model " + fixture + "/weights.safetensors --config " + fixture + "/config.json --inputs " +
                     fixture + "/inputs.safetensors --threads 1 --output " + out + layout);
    ASSERT_EQ(r.code, 0) << layout << "\n" << r.err;
    EXPECT_LT(error(io::load_safetensors(out).at("sample"), want), tolerance) << layout;
  }
}

}  // namespace cpdit::testing
