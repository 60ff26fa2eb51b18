#include <cpdit/core/error.hpp>
#include <cpdit/pipeline/qwenimage_pipeline.hpp>
#include <cpdit/tokenizers/tokenizer.hpp>

#include <algorithm>
#include <cstring>

namespace cpdit::pipeline {

QwenPromptEmbeds encode_qwenimage_prompts(const TextComponents& c, const std::vector<std::string>& prompts,
                                          int64_t max_sequence_length, const nn::LoadOptions& load) {
  CPDIT_CHECK(max_sequence_length >= 1 && max_sequence_length <= kQwenImageMaxSequenceLength, invalid_argument,
              "Qwen-Image's max sequence length is at most ", kQwenImageMaxSequenceLength, ", got ",
              max_sequence_length);
  CPDIT_CHECK(!prompts.empty(), invalid_argument, "no prompt to encode");
  std::vector<std::string> texts;
  const std::string tmpl = kQwenImagePromptTemplate;
  const size_t slot = tmpl.find("{}");
  for (const std::string& p : prompts) texts.push_back(tmpl.substr(0, slot) + p + tmpl.substr(slot + 2));
  const tokenizers::TokenBatch tokens =
      tokenizers::tokenize(*c.tokenizer("tokenizer"), texts, kQwenImageMaxSequenceLength + kQwenImagePromptDrop,
                           tokenizers::Padding::longest);
  const Tensor hidden = c.encoder("text_encoder", load)
                            .replica()
                            ->forward({{"input_ids", tokens.input_ids}, {"attention_mask", tokens.attention_mask}})
                            .at("last_hidden_state")
                            .contiguous();
  const int64_t batch = hidden.size(0), length = hidden.size(1), width = hidden.size(2);
  // Each row's real tokens (right padding: the first `real` of them) after the dropped prefix.
  std::vector<int64_t> kept;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t* mask = tokens.attention_mask.data<int64_t>() + b * length;
    const int64_t real = std::count(mask, mask + length, int64_t(1));
    CPDIT_CHECK(real > kQwenImagePromptDrop, invalid_argument, "the Qwen-Image prompt template made only ", real,
                " tokens with this tokenizer; the pipeline drops the first ", kQwenImagePromptDrop);
    kept.push_back(std::min(real - kQwenImagePromptDrop, max_sequence_length));
  }
  const int64_t longest = *std::max_element(kept.begin(), kept.end());
  QwenPromptEmbeds out{Tensor::zeros({batch, longest, width}), Tensor::zeros({batch, longest}, DType::i64)};
  bool padded = false;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t n = kept[size_t(b)];
    std::memcpy(out.embeds.data<float>() + b * longest * width,
                hidden.data<float>() + (b * length + kQwenImagePromptDrop) * width, size_t(n * width) * sizeof(float));
    std::fill_n(out.mask.data<int64_t>() + b * longest, n, int64_t(1));
    padded = padded || n < longest;
  }
  if (!padded) out.mask = Tensor();
  return out;
}

}  // namespace cpdit::pipeline
