#pragma once
// Binding checkpoint tensors to a module tree's parameters by their dotted paths.
#include <cpdit/core/precision.hpp>
#include <cpdit/core/dtype.hpp>
#include <cpdit/nn/module.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>

namespace cpdit::io {
class Checkpoint;
}

namespace cpdit::nn {

// name -> weight (dense, or block-quantised from a GGUF file). Read from a checkpoint these are
// zero-copy views of the mapped files, so a state dict is cheap to hold and to rename (checkpoint
// layouts are converted as state dicts).
using StateDict = std::map<std::string, Weight>;

// Every tensor of a checkpoint (safetensors, or GGUF: its block formats quantised; FP8 matrices as their
// codes, ComfyUI's scale_weight beside one applied to it and dropped with the file's scaled_fp8 marker).
StateDict read_state_dict(const io::Checkpoint& checkpoint);

struct LoadOptions {
  // What the weights are kept in. Unset: as the checkpoint stores them (f32, bf16 or f16; a mapped
  // checkpoint's tensors stay views of the file). f32: every tensor widened to f32 (quantised ones
  // decoded). bf16: the dense Linear weights narrowed to bf16, every other tensor as stored
  // (quantised ones stay quantised: Linear computes from their blocks).
  // Tensors already in their target dtype are shared, not copied: convert once (load one model and
  // take parameters_of), then every replica loaded from the result shares every weight.
  std::optional<DType> dtype = std::nullopt;
  // "Q8_0" or "Q4_K": the dense Linear weights whose rows are whole blocks are encoded in that GGUF
  // block format on load (kernels::quantise), as a model with no GGUF file of its own would be;
  // every other tensor as stored. Empty: no encoding.
  std::string blocks = {};
};

// "auto" (as stored), "f32", "bf16", "q8_0" or "q4_k", as the command line names them; anything else
// is refused.
LoadOptions load_options(const std::string& dtype);

// What that dtype means for the arithmetic: bf16 (and q8_0, q4_k) compute the bf16 Linear layers with
// bf16 products (f32 accumulation); auto and f32 keep every product exact in f32, whatever the weights
// are stored in.
MatmulPrecision matmul_precision_for(const std::string& dtype);

// Accepts f32, bf16 and f16 tensors, and block-quantised ones: kept as blocks for Linear weights
// (Parameter::matrix), decoded to f32 for any other. Missing, unexpected, wrongly shaped and wrongly
// typed keys are all reported together in one Error(invalid_argument). The bound weights are counted on
// weight_memory_counter (each storage once, however many models share it), not on the rank's counter.
void load_state_dict(Module& root, const StateDict& state, const LoadOptions& options = {});

// The bound parameter values of a loaded module (as bound: dense or quantised). Loading another
// replica from them shares every weight (no conversion is left to do): ranks as threads load once and
// share.
StateDict parameters_of(Module& root);

// A model of class M built from a checkpoint's config and bound to its state dict (weights already
// in the target dtype are shared with the state dict, so models built from one checkpoint share them).
template <class M, class Checkpoint>
std::unique_ptr<M> load_model(const Checkpoint& checkpoint, const LoadOptions& options = {}) {
  auto model = std::make_unique<M>(checkpoint.config);
  load_state_dict(*model, checkpoint.state, options);
  return model;
}

}  // namespace cpdit::nn
