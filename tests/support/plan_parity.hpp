#pragma once
// A model's context-parallel plan against the model on one rank: the sample on every rank of a
// ring x Ulysses mesh of local thread ranks (one compute thread each), each rank holding the whole
// sample after the plan's gather. Shared by the model families' parallel tests.
#include <cpdit/comm/local.hpp>
#include <cpdit/nn/model.hpp>

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace cpdit::testing {

struct MeshDegrees {
  int ring, ulysses;
};

using ModelLoader = std::function<std::unique_ptr<nn::Model>()>;  // a replica sharing one set of weights
using SampleError = std::function<double(const Tensor& got, const Tensor& want)>;

// error(sample, want) on every rank. Only numbers leave the rank threads: tensors stay charged to the
// rank that allocated them.
inline std::vector<double> parallel_sample_errors(const ModelLoader& load, const nn::TensorMap& inputs,
                                                  const Tensor& want, MeshDegrees d, parallel::RotateMethod rotation,
                                                  const SampleError& error) {
  std::vector<double> errors(size_t(d.ring * d.ulysses), -1.0);
  std::mutex mutex;
  comm::LocalOptions one_thread_each;
  one_thread_each.threads_per_rank = 1;
  comm::run_local(d.ring * d.ulysses, [&](comm::Communicator& comm) {
    auto model = load();
    parallel::ContextParallelConfig config{d.ring, d.ulysses};
    config.rotate_method = rotation;
    model->enable_parallelism(std::shared_ptr<comm::Communicator>(&comm, [](comm::Communicator*) {}), config);
    Tensor sample = model->forward(inputs).at("sample");
    const double e = sample.shape() == want.shape() ? error(sample, want) : 1e30;
    std::lock_guard lock(mutex);
    errors[size_t(comm.rank())] = e;
  }, one_thread_each);
  return errors;
}

// Every mesh of `degrees` under every ring rotation of `rotations` against `want` (one rank's sample,
// or the outside truth of a fixture): error below `tolerance` on every rank. `what` names the
// inputs in failures.
inline void expect_meshes_match(const ModelLoader& load, const nn::TensorMap& inputs, const Tensor& want,
                                const std::string& what, const std::vector<MeshDegrees>& degrees,
                                const std::vector<parallel::RotateMethod>& rotations, const SampleError& error,
                                double tolerance) {
  for (auto rotation : rotations)
    for (MeshDegrees d : degrees)
      for (double e : parallel_sample_errors(load, inputs, want, d, rotation, error))
        EXPECT_LT(e, tolerance) << what << ", ring " << d.ring << " x ulysses " << d.ulysses
                                << (rotation == parallel::RotateMethod::p2p ? ", p2p" : ", allgather");
}

// The single-rank sample of `inputs` as `want` of expect_meshes_match.
inline void expect_plan_parity(const ModelLoader& load, const nn::TensorMap& inputs, const std::string& what,
                               const std::vector<MeshDegrees>& degrees,
                               const std::vector<parallel::RotateMethod>& rotations, const SampleError& error,
                               double tolerance) {
  expect_meshes_match(load, inputs, load()->forward(inputs).at("sample"), what, degrees, rotations, error, tolerance);
}

}  // namespace cpdit::testing
