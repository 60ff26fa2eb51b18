#include "component_flags.hpp"

namespace cpdit::app {

void add_component_flags(CLI::App& cmd, CLI::Option_group& model_group, pipeline::PipelineSource& source,
                         ComponentFlags& flags) {
  model_group.add_option("--transformer", source.transformer,
                         "a transformer file (.safetensors in diffusers' or the original release's names, or .gguf): "
                         "alone it is the model (no folder: FLUX.1-dev's scheduler; give --vae and the text encoders "
                         "as files), with --model DIR it replaces DIR/transformer/");
  cmd.add_option("--vae", source.vae,
                 "a VAE .safetensors decoding instead of DIR/vae/: diffusers' names, FLUX.1's ae.safetensors or Wan 2.1's "
                 "original names (its config from its shapes unless --vae-config)");
  cmd.add_option("--vae-config", source.vae_config, "--vae's config.json (default: read from its tensors' shapes)");
  cmd.add_option("--clip-l", flags.clip_l, "FLUX.1's CLIP-L text encoder as one file (ComfyUI's clip_l.safetensors)");
  cmd.add_option("--t5xxl", flags.t5xxl,
                 "FLUX.1's or LTX-Video's T5 encoder as one file (ComfyUI's t5xxl_fp16 / _fp8_e4m3fn.safetensors)");
  cmd.add_option("--umt5", flags.umt5, "Wan's and SkyReels-V2's UMT5 encoder as one file (umt5_xxl_*.safetensors)");
  cmd.add_option("--text-encoder", flags.text_encoders,
                 "a text encoder file of any class the pipeline reads, told by its tensors (repeatable)");
  cmd.add_option("--tokenizer", flags.tokenizers,
                 "a tokenizer folder (vocab.json + merges.txt, spiece.model or tokenizer.json) for the text encoder "
                 "that reads its kind, instead of DIR/tokenizer*/ (repeatable)");
}

void apply_component_flags(const ComponentFlags& flags, pipeline::PipelineSource& source) {
  if (!flags.clip_l.empty()) source.text_encoders.push_back({flags.clip_l, "--clip-l", "CLIPTextModel"});
  if (!flags.t5xxl.empty()) source.text_encoders.push_back({flags.t5xxl, "--t5xxl", "T5EncoderModel"});
  if (!flags.umt5.empty()) source.text_encoders.push_back({flags.umt5, "--umt5", "UMT5EncoderModel"});
  for (const std::string& file : flags.text_encoders) source.text_encoders.push_back({file, "--text-encoder", ""});
  source.tokenizers = flags.tokenizers;
}

}  // namespace cpdit::app
