#pragma once
// Context-parallel configuration and the checks that refuse an impossible one at setup, each with a
// message that names the fix.
#include <cpdit/attention/attention.hpp>
#include <cpdit/parallel/layout.hpp>

#include <cstdint>
#include <string>

namespace cpdit::parallel {

// How ring attention moves the KV chunks around the ring.
enum class RotateMethod {
  p2p,        // double-buffered isend/irecv: own + one in-flight chunk per rank
  allgather,  // one all-gather of every chunk, then a local loop: whole K, V on every rank
};
const char* rotate_method_name(RotateMethod method);
RotateMethod parse_rotate_method(const std::string& name);  // "p2p" | "allgather"

struct ContextParallelConfig {
  int ring_degree = 1;
  int ulysses_degree = 1;
  // CFG-parallel: 2 runs the conditional and the unconditional pass of classifier-free guidance on
  // two rank groups of ring x Ulysses each (comm::Mesh), which swap their noise predictions. A model
  // is parallel over one group; the pipeline's guidance step (pipeline/guidance.hpp) spans both.
  int cfg_degree = 1;
  RotateMethod rotate_method = RotateMethod::p2p;
  // true: every chunk is computed from f32 inputs, so each partial result is exact f32 before the
  // LSE merge. false: the backend sees the model dtype. Merges always run in f32 and the output is
  // cast to the model dtype once, at the end.
  bool convert_to_fp32 = true;
  // Which tokens each rank holds (layout.hpp). The splits of the tokens and the router's position
  // rules must agree on it: a model's enable_parallelism sets it to the model's choice.
  TokenLayout token_layout = TokenLayout::contiguous;

  int group_size() const { return ring_degree * ulysses_degree; }  // the ranks of one CFG group
  int world_size() const { return cfg_degree * group_size(); }
  attention::Requirements::Mode mode() const;  // local | ring | ulysses | unified
};

// Degrees >= 1, cfg 1 or 2, and ring * ulysses == the size of the context-parallel group (one CFG
// group).
void validate_degrees(const ContextParallelConfig& config, int group_size);

// cfg 2 only where the pipeline runs classifier-free guidance; `why_not` says why a run has none
// ("FLUX.1-dev's guidance is an embedding").
void validate_cfg(const ContextParallelConfig& config, bool runs_guidance, const std::string& why_not);

// What one attention call asks of the context-parallel path.
struct CallShape {
  int64_t heads = 0;     // H (query heads)
  int64_t kv_heads = 0;  // H_kv; H % H_kv == 0
  attention::MaskKind mask = attention::MaskKind::none;
  DType dtype = DType::f32;
  bool backward = false;
  attention::MaskRule rule = attention::MaskRule::none;  // alone or with a key_padding mask
};

// Heads (H >= U so every Ulysses rank keeps a real head; GQA's key/value heads are copied when there
// are fewer than U), mask kinds the context-parallel modes can serve (none, key_padding, each with
// or without a position rule), and the backend's capabilities for the mode.
void validate_call(const ContextParallelConfig& config, const attention::Backend& backend,
                   const CallShape& call);

}  // namespace cpdit::parallel
