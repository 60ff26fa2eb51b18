#include <cpdit/models/ltx_video/checkpoint.hpp>
#include <cpdit/nn/config_inference.hpp>

namespace cpdit::models::ltx_video {

LtxVideoCheckpoint read_ltx_video_checkpoint(const std::string& path, const std::optional<std::string>& config_path) {
  return nn::read_transformer_checkpoint<LtxVideoCheckpoint>(path, config_path);
}

std::unique_ptr<LTXVideoTransformer3DModel> load_ltx_video(const LtxVideoCheckpoint& checkpoint,
                                                           const nn::LoadOptions& options) {
  return nn::load_model<LTXVideoTransformer3DModel>(checkpoint, options);
}

}  // namespace cpdit::models::ltx_video
