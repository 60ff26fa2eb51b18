// `cpdit tokenize`: a JSON list of prompts to input_ids and attention_mask, as the diffusers pipelines
// tokenise them (truncation; padding to the max length, or to the longest prompt as Qwen-Image's does).
#include "command.hpp"
#include "option_checks.hpp"
#include "output_paths.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/tokenizers/tokenizer.hpp>

#include <memory>
#include <string>
#include <vector>

namespace cpdit::app {
namespace {

struct TokenizeOptions {
  std::string tokenizer, prompts, output, padding = "max_length";
  int64_t max_length = 0;
};

void run_tokenize(const TokenizeOptions& o) {
  std::vector<NamedPath> inputs = folder_inputs("--tokenizer", o.tokenizer);
  inputs.push_back({"--prompts", o.prompts});
  refuse_overwrite({{"--output", o.output}}, inputs);
  const auto tokenizer = tokenizers::load_tokenizer(o.tokenizer);
  const nlohmann::json list = io::read_json(o.prompts);
  CPDIT_CHECK(list.is_array(), invalid_argument, o.prompts, ": expected a JSON list of prompt strings");
  std::vector<std::string> prompts;
  for (const auto& p : list) {
    CPDIT_CHECK(p.is_string(), invalid_argument, o.prompts, ": entry ", prompts.size(), " is not a string");
    prompts.push_back(p.get<std::string>());
  }
  CPDIT_CHECK(o.max_length >= 0, invalid_argument, "--max-length must be positive, got ", o.max_length);
  const int64_t length = o.max_length > 0 ? o.max_length : tokenizer->model_max_length();
  const tokenizers::TokenBatch batch = tokenizers::tokenize(
      *tokenizer, prompts, length, o.padding == "longest" ? tokenizers::Padding::longest : tokenizers::Padding::max_length);
  io::save_safetensors(o.output, {{"input_ids", batch.input_ids}, {"attention_mask", batch.attention_mask}});
  print_written({{"--output", o.output}});
}

void add_tokenize(CLI::App& parent) {
  auto o = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = parent.add_subcommand(
      "tokenize", "Tokenise a JSON list of prompts (CLIP BPE, Qwen2 byte-level BPE or T5/UMT5 SentencePiece); "
                  "writes input_ids and attention_mask, I64 (N, L), padded to the max length or the longest prompt");
  cmd->add_option("--tokenizer", o->tokenizer,
                  "tokenizer folder: vocab.json + merges.txt (CLIP, a pipeline's tokenizer/), a byte-level BPE "
                  "tokenizer.json (Qwen2, Qwen-Image's tokenizer/) or spiece.model (T5/UMT5, tokenizer_2/)")
      ->required();
  cmd->add_option("--prompts", o->prompts, "JSON file holding a list of prompt strings")->required();
  cmd->add_option("--max-length", o->max_length,
                  "pad / truncate every row to this many ids (default: the tokenizer's model_max_length, CLIP 77)")
      ->check(whole_number<int64_t>());
  cmd->add_option("--padding", o->padding,
                  "max_length: every row --max-length ids; longest: the longest prompt's (transformers' padding=True)")
      ->capture_default_str()
      ->check(CLI::IsMember({"max_length", "longest"}));
  cmd->add_option("-o,--out,--output", o->output, "safetensors to write (atomically)")->required()->check(output_name());
  cmd->callback([o] { run_tokenize(*o); });
}

const bool registered = register_command("tokenize", add_tokenize);

}  // namespace
}  // namespace cpdit::app
