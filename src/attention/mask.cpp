// Mask names and the constructors of the position rules.
#include <cpdit/attention/attention.hpp>
#include <cpdit/core/error.hpp>

namespace cpdit::attention {

const char* mask_kind_name(MaskKind kind) {
  switch (kind) {
    case MaskKind::none: return "none";
    case MaskKind::key_padding: return "key_padding";
    case MaskKind::boolean: return "boolean";
    case MaskKind::additive: return "additive";
  }
  return "?";
}

const char* mask_rule_name(MaskRule rule) {
  switch (rule) {
    case MaskRule::none: return "none";
    case MaskRule::causal: return "causal";
    case MaskRule::block_causal: return "block-causal";
  }
  return "?";
}

Mask Mask::causal() {
  Mask m;
  m.rule = MaskRule::causal;
  return m;
}

Mask Mask::block_causal(int64_t tokens_per_block) {
  CPDIT_CHECK(tokens_per_block >= 1, invalid_argument, "block-causal mask: tokens per block must be "
              "at least 1, got ", tokens_per_block);
  Mask m;
  m.rule = MaskRule::block_causal;
  m.block = tokens_per_block;
  return m;
}

Mask Mask::with_key_padding(Tensor keep) const {
  Mask m = *this;
  m.kind = MaskKind::key_padding;
  m.tensor = std::move(keep);
  return m;
}

}  // namespace cpdit::attention
