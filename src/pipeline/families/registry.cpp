#include <cpdit/core/error.hpp>
#include <cpdit/pipeline/family.hpp>
#include <cpdit/pipeline/presets.hpp>

namespace cpdit::pipeline {

// Each family's entry, in its own file.
const Family& flux_family();
const Family& wan_family();
const Family& qwenimage_family();
const Family& skyreels_family();
const Family& ltx_family();

const std::vector<const Family*>& families() {
  static const std::vector<const Family*> all = {&flux_family(), &wan_family(), &qwenimage_family(),
                                                 &skyreels_family(), &ltx_family()};
  return all;
}

const Family& family_for_class(const std::string& transformer_class) {
  std::string runnable;
  for (const Family* f : families()) {
    if (f->transformer_class() == transformer_class) return *f;
    runnable += (runnable.empty() ? "" : ", ") + f->transformer_class();
  }
  fail(ErrorKind::unsupported, "generate has no pipeline for model class '", transformer_class, "'; it runs: ",
       runnable);
}

const Family& family_for_pipeline(const std::string& pipeline_class) {
  std::string runnable;
  for (const Family* f : families())
    for (const std::string& name : f->pipeline_classes()) {
      if (name == pipeline_class) return *f;
      runnable += (runnable.empty() ? "" : ", ") + name;
    }
  fail(ErrorKind::unsupported, "pipeline '", pipeline_class, "' is not supported; cpdit runs: ", runnable);
}

nn::TensorMap Family::encode_prompt(const TextComponents& components, const PromptEncoding&) const {
  fail(ErrorKind::unsupported, components.pipeline_class, ": its text encoder is not supported yet; give the ",
       "prompt's embeddings (--embeddings, prompt_embeds=)");
}

const Family& family_for_preset(const std::string& preset) {
  check_preset(preset);
  for (const Family* f : families())
    if (preset.rfind(f->preset_prefix(), 0) == 0) return *f;
  fail(ErrorKind::internal, "preset ", preset, " belongs to no family");
}

const char* no_guidance_reason(bool has_negative, const char* scale_flag_at_most_1) {
  return has_negative ? scale_flag_at_most_1 : "there are no negative prompt embeddings";
}

std::string text_source(const Request& r) {
  return r.embeddings.empty() ? "the encoded prompt" : r.embeddings_source;
}

}  // namespace cpdit::pipeline
