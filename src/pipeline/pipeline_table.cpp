#include <cpdit/pipeline/pipeline_table.hpp>

#include <utility>
#include <vector>

namespace cpdit::pipeline {

PipelineKind pipeline_for(const std::string& class_name) {
  static const std::vector<std::pair<std::string, PipelineKind>> table = {
      {"FluxTransformer2DModel", PipelineKind::flux},
      {"WanTransformer3DModel", PipelineKind::wan},
      {"QwenImageTransformer2DModel", PipelineKind::qwenimage},
      {"SkyReelsV2Transformer3DModel", PipelineKind::skyreels_v2},
      {"LTXVideoTransformer3DModel", PipelineKind::ltx_video},
  };
  std::string runnable;
  for (const auto& [name, kind] : table) {
    if (name == class_name) return kind;
    runnable += (runnable.empty() ? "" : ", ") + name;
  }
  fail(ErrorKind::unsupported, "generate has no pipeline for model class '", class_name,
       "'; it runs: ", runnable);
}

}  // namespace cpdit::pipeline
