#pragma once
// `cpdit forward` on a model and an inputs file under several rank layouts: the written `sample` must
// be within `tolerance` of `want` by `error` each time.
#include "support/run_cli.hpp"

#include <cpdit/io/safetensors.hpp>

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace cpdit::testing {

// `model_args`: the --model (and --config) arguments; each of `layouts` is appended to one run.
inline void expect_forward_cli_runs(const std::string& model_args, const std::string& inputs,
                                    const std::vector<std::string>& layouts, const Tensor& want,
                                    const std::function<double(const Tensor&, const Tensor&)>& error,
                                    double tolerance) {
  TempDir dir("forward_cli");
  for (const std::string& layout : layouts) {
    const std::string out = dir.file("sample.safetensors");
    auto r = run_cli("forward " + model_args + " --inputs " + inputs + " --threads 1 --output " + out + layout);
    ASSERT_EQ(r.code, 0) << layout << "\n" << r.err;
    EXPECT_LT(error(io::load_safetensors(out).at("sample"), want), tolerance) << layout;
  }
}

// A fixture folder (weights.safetensors, config.json, inputs.safetensors) on one rank, under ring x
// Ulysses 2 x 2, and on a ring of 3 rotated by all-gather.
inline void expect_forward_cli_sample(const std::string& fixture, const Tensor& want,
                                      const std::function<double(const Tensor&, const Tensor&)>& error,
                                      double tolerance) {
  expect_forward_cli_runs("--model " + fixture + "/weights.safetensors --config " + fixture + "/config.json",
                          fixture + "/inputs.safetensors",
                          {"", " --ring 2 --ulysses 2", " --ring 3 --rotate allgather"}, want, error, tolerance);
}

}  // namespace cpdit::testing
