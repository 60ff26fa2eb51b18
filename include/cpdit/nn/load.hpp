#pragma once
// Binding checkpoint tensors to a module tree's parameters by their dotted paths.
#include <cpdit/core/dtype.hpp>
#include <cpdit/nn/module.hpp>

#include <map>
#include <string>

namespace cpdit::io {
class Checkpoint;
}

namespace cpdit::nn {

// name -> tensor. Read from a checkpoint these are zero-copy views of the mapped files, so a state
// dict is cheap to hold and to rename (checkpoint layouts are converted as state dicts).
using StateDict = std::map<std::string, Tensor>;

StateDict read_state_dict(const io::Checkpoint& checkpoint);

struct LoadOptions {
  // Linear weights are kept in this dtype (f32, or bf16 for the bf16 GEMM path); every other
  // parameter is f32. Tensors already in the target dtype are shared, not copied, so model replicas
  // loaded from one state dict (ranks as threads) hold one copy of the weights.
  DType matrix_dtype = DType::f32;
};

// Accepts f32, bf16 and f16 tensors. Missing, unexpected, wrongly shaped and wrongly typed keys are
// all reported together in one Error(invalid_argument).
void load_state_dict(Module& root, const StateDict& state, const LoadOptions& options = {});

// The bound parameter values of a loaded module. Loading another replica from them shares every
// weight (no conversion is left to do): ranks as threads load once and share.
StateDict parameters_of(Module& root);

}  // namespace cpdit::nn
