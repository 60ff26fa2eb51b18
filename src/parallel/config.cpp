// Setup-time validation of a context-parallel configuration.
#include <cpdit/core/error.hpp>
#include <cpdit/parallel/config.hpp>

namespace cpdit::parallel {

using attention::MaskKind;
using Mode = attention::Requirements::Mode;

const char* rotate_method_name(RotateMethod method) {
  return method == RotateMethod::p2p ? "p2p" : "allgather";
}

RotateMethod parse_rotate_method(const std::string& name) {
  if (name == "p2p") return RotateMethod::p2p;
  if (name == "allgather") return RotateMethod::allgather;
  fail(ErrorKind::invalid_argument, "unknown ring rotate method '", name,
       "'; use p2p or allgather");
}

Mode ContextParallelConfig::mode() const {
  if (ring_degree > 1 && ulysses_degree > 1) return Mode::unified;
  if (ring_degree > 1) return Mode::ring;
  if (ulysses_degree > 1) return Mode::ulysses;
  return Mode::local;
}

void validate_degrees(const ContextParallelConfig& config, int group_size) {
  CPDIT_CHECK(config.ring_degree >= 1 && config.ulysses_degree >= 1, invalid_argument,
              "context parallel: ring degree ", config.ring_degree, " and Ulysses degree ",
              config.ulysses_degree, " must both be at least 1 (1 turns a mode off)");
  CPDIT_CHECK(config.cfg_degree == 1 || config.cfg_degree == 2, invalid_argument, "CFG-parallel degree ",
              config.cfg_degree, " is not 1 or 2: guidance has two passes (conditional, unconditional) to share");
  CPDIT_CHECK(config.group_size() == group_size, invalid_argument, "context parallel: ring degree ",
              config.ring_degree, " x Ulysses degree ", config.ulysses_degree, " = ",
              config.group_size(), " but the group has ", group_size,
              " ranks; choose degrees whose product is ", group_size);
}

void validate_cfg(const ContextParallelConfig& config, bool runs_guidance, const std::string& why_not) {
  CPDIT_CHECK(config.cfg_degree == 1 || runs_guidance, invalid_argument, "CFG-parallel (cfg ", config.cfg_degree, ")",
              " puts the conditional and unconditional passes of classifier-free guidance on two rank groups, but ",
              why_not, ", so no unconditional pass runs; use cfg 1 (no --cfg-parallel)");
}

void validate_call(const ContextParallelConfig& config, const attention::Backend& backend,
                   const CallShape& call) {
  const Mode mode = config.mode();
  const int U = config.ulysses_degree;
  CPDIT_CHECK(call.kv_heads > 0 && call.heads % call.kv_heads == 0, invalid_argument,
              "context parallel: query heads ", call.heads, " must be a multiple of key/value heads ",
              call.kv_heads);
  // Heads are dealt to Ulysses ranks by the tensor_split rule and padded with zero heads to the
  // largest share, and key/value heads are copied when there are fewer than ranks
  // (ulysses.hpp), so any count works as long as every rank keeps a real query head.
  CPDIT_CHECK(call.heads >= U, invalid_argument, "context parallel: Ulysses degree ", U,
              " exceeds the ", call.heads, " query heads, so a rank would hold only padding; use ulysses_degree <= ",
              call.heads, " and put the other ranks on the ring");
  if (mode != Mode::local) {
    CPDIT_CHECK(call.mask == MaskKind::none || call.mask == MaskKind::key_padding, unsupported,
                "context parallel (", config.ring_degree, " ring x ", U, " Ulysses) cannot split a ",
                attention::mask_kind_name(call.mask),
                " mask across ranks; pass a key_padding mask or a position rule (Mask::causal, "
                "Mask::block_causal), or run the call with replicated keys (KvPlacement::replicated)");
  }
  attention::Requirements needs;
  needs.mask = call.mask;
  needs.rule = call.rule;
  needs.lse = mode == Mode::ring || mode == Mode::unified;
  needs.backward = call.backward;
  needs.gqa = call.kv_heads < call.heads;
  needs.dtype = config.convert_to_fp32 ? DType::f32 : call.dtype;
  needs.mode = mode;
  attention::check_supports(backend, needs);
}

}  // namespace cpdit::parallel
