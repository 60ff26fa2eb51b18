#include <cpdit/core/error.hpp>
#include <cpdit/models/text/encoder.hpp>

namespace cpdit::models::text {

TextInputs TextEncoder::checked_inputs(const nn::TensorMap& inputs, const char* model) const {
  CPDIT_CHECK(!parallel_enabled(), unsupported, model,
              " runs whole on one rank (a prompt is short next to the image tokens): run it without --ring/--ulysses");
  for (const auto& [name, t] : inputs)
    CPDIT_CHECK(name == "input_ids" || name == "attention_mask", invalid_argument, model, " forward takes no input '",
                name, "' (it takes input_ids [, attention_mask])");
  auto ids = inputs.find("input_ids");
  CPDIT_CHECK(ids != inputs.end() && ids->second.defined(), invalid_argument, model, " forward needs input_ids");
  TextInputs out{ids->second.contiguous(), {}};
  CPDIT_CHECK(out.input_ids.dtype() == DType::i64 && out.input_ids.dim() == 2 && out.input_ids.size(1) >= 1,
              invalid_argument, model, " input_ids must be I64 (B, S), got ", out.input_ids.describe());
  auto mask = inputs.find("attention_mask");
  if (mask != inputs.end() && mask->second.defined()) {
    const Tensor& m = mask->second;
    CPDIT_CHECK((m.dtype() == DType::i64 || m.dtype() == DType::boolean) && m.shape() == out.input_ids.shape(),
                invalid_argument, model, " attention_mask must be I64 or BOOL of input_ids' shape ",
                shape_string(out.input_ids.shape()), ", got ", m.describe());
    out.attention_mask = m.to(DType::i64).contiguous();
    const int64_t* p = out.attention_mask.data<int64_t>();
    for (int64_t i = 0; i < out.attention_mask.numel(); ++i)
      CPDIT_CHECK(p[i] == 0 || p[i] == 1, invalid_argument, model, " attention_mask must hold 0 and 1 only, found ", p[i]);
  }
  return out;
}

attention::Mask causal_text_mask(const Tensor& attention_mask) {
  const attention::Mask causal = attention::Mask::causal();
  if (!attention_mask.defined()) return causal;
  Tensor keep = Tensor::empty(attention_mask.shape(), DType::boolean);
  const int64_t* pad = attention_mask.data<int64_t>();
  for (int64_t i = 0; i < keep.numel(); ++i) keep.data<bool>()[i] = pad[i] != 0;
  return causal.with_key_padding(keep);
}

}  // namespace cpdit::models::text
