#include <cpdit/core/block_format.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/nn/load.hpp>

#include <cmath>
#include <set>
#include <sstream>
#include <vector>

namespace cpdit::nn {

namespace {
// "3 missing (a, b, c)", listing at most a handful of names.
void report(std::ostringstream& out, const char* what, const std::vector<std::string>& items) {
  if (items.empty()) return;
  constexpr size_t kShown = 6;
  if (out.tellp() > 0) out << "; ";
  out << items.size() << " " << what << " (";
  for (size_t i = 0; i < items.size() && i < kShown; ++i) out << (i ? ", " : "") << items[i];
  if (items.size() > kShown) out << ", and " << items.size() - kShown << " more";
  out << ")";
}

bool is_float(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

DType target_dtype(const Parameter& p, DType stored, const LoadOptions& options) {
  if (!options.dtype) return stored;
  if (*options.dtype == DType::f32) return DType::f32;
  return p.matrix ? DType::bf16 : stored;
}

// The weight as `options` asks: quantised blocks stay blocks unless f32 is asked (then decoded). A
// quantised tensor that no Linear computes with (a GGUF converter may quantise any 2-D tensor of whole
// blocks, e.g. LTX-Video's scale_shift_table) is decoded to f32 once, here.
Weight converted(const Parameter& p, const Weight& stored, const LoadOptions& options) {
  if (stored.is_quantised())
    return options.dtype == DType::f32 || !p.matrix ? Weight(kernels::dequantise(stored)) : stored;
  if (!options.blocks.empty() && p.matrix && stored.shape().size() == 2 &&
      stored.shape()[1] % find_block_format(options.blocks)->block_size == 0)
    return kernels::quantise(stored.values(), options.blocks);
  return stored.values().to(target_dtype(p, stored.dtype(), options));
}
}  // namespace

MatmulPrecision matmul_precision_for(const std::string& dtype) {
  return dtype == "bf16" || dtype == "q8_0" || dtype == "q4_k" ? MatmulPrecision::bf16 : MatmulPrecision::exact_f32;
}

LoadOptions load_options(const std::string& dtype) {
  if (dtype == "auto") return {};
  if (dtype == "f32") return {.dtype = DType::f32};
  if (dtype == "bf16") return {.dtype = DType::bf16};
  if (dtype == "q8_0") return {.blocks = "Q8_0"};
  if (dtype == "q4_k") return {.blocks = "Q4_K"};
  fail(ErrorKind::invalid_argument,
       "--dtype must be auto (as the checkpoint stores them), f32, bf16, q8_0 or q4_k, got '", dtype, "'");
}

namespace {

// ComfyUI's "scaled" FP8 files: beside each FP8 matrix X.weight a scalar X.scale_weight multiplies its
// values (ComfyUI's weight * scale_weight), and a `scaled_fp8` tensor marks the file. X.scale_input serves
// FP8 matrix products only, which decoded weights do not run: dropped, as the marker.
void apply_weight_scales(StateDict& state, const std::string& path) {
  std::vector<std::string> scales, dropped;
  for (const auto& [name, weight] : state) {
    if (name.ends_with(".scale_weight")) scales.push_back(name);
    if (name.ends_with(".scale_input") || name == "scaled_fp8" || name.ends_with(".scaled_fp8")) dropped.push_back(name);
  }
  for (const std::string& name : scales) {
    const std::string matrix = name.substr(0, name.size() - 13) + ".weight";
    const auto it = state.find(matrix);
    CPDIT_CHECK(it != state.end(), invalid_argument, path, ": ", name, " scales no FP8 matrix (", matrix, " is missing)");
    const Weight& scale = state.at(name);
    CPDIT_CHECK(!scale.is_quantised() && is_float(scale.dtype()) && scale.codes().numel() == 1, invalid_argument, path,
                ": ", name, " is ", scale.describe(), ", not one float");
    const float value = scale.values().to(DType::f32).contiguous().data<float>()[0];
    CPDIT_CHECK(std::isfinite(value), invalid_argument, path, ": ", name, " is ", value, ", not a finite scale");
    it->second = it->second.scaled(value);
    state.erase(name);
  }
  for (const std::string& name : dropped) state.erase(name);
}

}  // namespace

StateDict read_state_dict(const io::Checkpoint& checkpoint) {
  StateDict state;
  for (const auto& name : checkpoint.names()) state.emplace(name, checkpoint.weight(name));
  apply_weight_scales(state, checkpoint.path());
  return state;
}

void load_state_dict(Module& root, const StateDict& state, const LoadOptions& options) {
  CPDIT_CHECK(!options.dtype || *options.dtype == DType::f32 || *options.dtype == DType::bf16, invalid_argument,
              "weights can be kept as stored, in f32 or in bf16, not ", dtype_name(*options.dtype));
  std::vector<std::string> missing, unexpected, misshaped, mistyped;
  std::set<std::string> expected;
  auto params = root.named_parameters();
  for (auto& [name, p] : params) {
    expected.insert(name);
    auto it = state.find(name);
    if (it == state.end()) {
      missing.push_back(name);
    } else if (it->second.shape() != p->shape) {
      misshaped.push_back(name + ": expected " + shape_string(p->shape) + ", got " + shape_string(it->second.shape()));
    } else if (!it->second.is_quantised() && !is_float(it->second.dtype())) {
      mistyped.push_back(name + ": " + it->second.format());
    }
  }
  for (const auto& [name, t] : state)
    if (!expected.count(name)) unexpected.push_back(name);

  std::ostringstream problems;
  report(problems, "missing", missing);
  report(problems, "unexpected", unexpected);
  report(problems, "wrongly shaped", misshaped);
  report(problems, "not f32/bf16/f16 or quantised", mistyped);
  CPDIT_CHECK(problems.tellp() == 0, invalid_argument, "checkpoint does not match the model: ", problems.str(),
              " (check the model config against the weights)");

  for (auto& [name, p] : params) {
    p->value = converted(*p, state.at(name), options);
    p->value.charge_to(weight_memory_counter());
  }
}

StateDict parameters_of(Module& root) {
  StateDict state;
  for (auto& [name, p] : root.named_parameters()) state.emplace(name, p->value);
  return state;
}

}  // namespace cpdit::nn
