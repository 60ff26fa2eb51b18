#pragma once
// A model fixture of tests/data/fixtures (made by tools/reference/ from the real diffusers or
// transformers code): a folder with weights.safetensors and config.json beside the tensors of a run
// (inputs, expected, intermediates .safetensors), and the check every family's test makes with it.
#include "support/record_outputs.hpp"

#include <cpdit/io/safetensors.hpp>
#include <cpdit/nn/load.hpp>
#include <cpdit/nn/model.hpp>

#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace cpdit::testing {

inline std::string fixture_dir(const std::string& name) { return std::string(CPDIT_TEST_DATA) + "/fixtures/" + name; }
inline std::string fixture_weights(const std::string& name) { return fixture_dir(name) + "/weights.safetensors"; }
inline std::string fixture_config(const std::string& name) { return fixture_dir(name) + "/config.json"; }

// The fixture model's weights as a state dict (what a family's config inference reads).
inline nn::StateDict fixture_state_dict(const std::string& name) {
  return nn::read_state_dict(io::Checkpoint::open(fixture_weights(name)));
}

// The tensors of <fixture>/<file>.safetensors, e.g. fixture_file("flux_tiny", "inputs").
inline nn::TensorMap fixture_file(const std::string& name, const std::string& file) {
  return io::load_safetensors(fixture_dir(name) + "/" + file + ".safetensors");
}

// One forward of `model` on `inputs` with every module's output recorded: its output `output`
// against `expected`, and each of `intermediates` (by module path) against what that module returned.
// One run serves both, so a wrong output points at the first module that went wrong.
inline void expect_forward_matches(nn::Model& model, const nn::TensorMap& inputs, const std::string& output,
                                   const Tensor& expected, const nn::TensorMap& intermediates,
                                   const std::function<double(const Tensor&, const Tensor&)>& error, double tolerance) {
  nn::TensorMap outputs;
  expect_intermediates(model, [&] { outputs = model.forward(inputs); }, intermediates, error, tolerance);
  ASSERT_TRUE(outputs.count(output)) << "no output " << output;
  expect_sample(outputs.at(output), expected, error, tolerance);
}

// How many of a model's parameters are bound in `format` ("Q8_0", "Q4_K": kept as blocks, not decoded).
inline int parameters_in_format(nn::Module& model, const std::string& format) {
  int n = 0;
  for (auto& [name, p] : model.named_parameters()) n += p->value.format() == format;
  return n;
}

}  // namespace cpdit::testing
