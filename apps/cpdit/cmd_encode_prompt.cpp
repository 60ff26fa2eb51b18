// `cpdit encode-prompt`: a prompt to the embeddings the pipeline's own encode_prompt returns (see
// pipeline/prompt_encoding.hpp), written for `generate --embeddings`; from a pipeline folder, or from
// a preset's built-in text encoders (what `generate --preset NAME --prompt` encodes).
#include "command.hpp"
#include "dry_run.hpp"
#include "option_checks.hpp"
#include "output_paths.hpp"
#include "weight_flags.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/pipeline/prompt_encoding.hpp>
#include <cpdit/pipeline/stages.hpp>

#include <memory>
#include <string>

namespace cpdit::app {
namespace {

struct EncodePromptOptions {
  std::string model, preset, prompt, out, dtype = "auto";
  std::optional<std::string> negative_prompt;
  int64_t max_sequence_length = 512;
  bool dry_run = false;
};

void run_encode_prompt(const EncodePromptOptions& o) {
  const ScopedMatmulPrecision precision(nn::matmul_precision_for(o.dtype));
  refuse_overwrite({{"--out", o.out}}, folder_inputs("--model", o.model));
  pipeline::PromptEncoding request{o.prompt, o.negative_prompt, o.max_sequence_length, nn::load_options(o.dtype)};
  // A preset's built-in encoders, or (none) the pipeline folder's.
  std::optional<pipeline::TextComponents> text;
  if (!o.preset.empty()) text = pipeline::PipelineParts::of_preset(o.preset).text;
  if (o.dry_run) {
    refuse_missing({{"--model", o.model}});
    return print_dry_run({"encode \"" + o.prompt + "\" (" + std::to_string(o.max_sequence_length) +
                              " tokens at most) with the text encoders of " +
                              (o.preset.empty() ? o.model : "preset " + o.preset),
                          "write " + o.out});
  }
  io::save_safetensors(o.out, text ? pipeline::encode_prompt(*text, request) : pipeline::encode_prompt(o.model, request));
  print_written({{"--out", o.out}});
}

void add_encode_prompt(CLI::App& parent) {
  auto o = std::make_shared<EncodePromptOptions>();
  CLI::App* cmd = parent.add_subcommand(
      "encode-prompt", "Encode a prompt as the diffusers pipeline's encode_prompt does (FLUX.1: T5 prompt_embeds + "
                       "CLIP pooled_prompt_embeds; Wan: UMT5 prompt_embeds and negative_prompt_embeds; Qwen-Image: "
                       "Qwen2.5-VL prompt_embeds and negative_prompt_embeds)");
  CLI::Option_group* source = cmd->add_option_group("Model");
  source->add_option("-m,--model", o->model, "diffusers pipeline folder (model_index.json, tokenizer*/, text_encoder*/)");
  source->add_option("--preset", o->preset,
                     "a preset's built-in text encoders (every preset)");
  source->require_option(1);
  cmd->add_option("-p,--prompt", o->prompt, "the prompt")->required();
  cmd->add_option("-n,--negative-prompt", o->negative_prompt, "negative prompt (FLUX.1 true CFG; Wan default \"\"; Qwen-Image default \" \")");
  cmd->add_option("--max-sequence-length", o->max_sequence_length,
                  "text tokens (FLUX.1-dev, Wan and Qwen-Image 512, FLUX.1-schnell 256; Qwen-Image at most 1024)")
      ->capture_default_str()
      ->check(whole_number<int64_t>());
  add_dtype_flag(*cmd, o->dtype);
  cmd->add_option("-o,--out,--output", o->out, "safetensors to write (atomically)")->required()->check(output_name());
  add_dry_run_flag(*cmd, o->dry_run);
  cmd->callback([o] { run_encode_prompt(*o); });
}

const bool registered = register_command("encode-prompt", add_encode_prompt);

}  // namespace
}  // namespace cpdit::app
