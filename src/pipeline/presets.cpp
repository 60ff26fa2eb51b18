#include <cpdit/core/error.hpp>
#include <cpdit/core/threads.hpp>
#include <cpdit/pipeline/presets.hpp>
#include <cpdit/pipeline/random.hpp>
#include <cpdit/pipeline/skyreels_pipeline.hpp>

#include <algorithm>
#include <cmath>

namespace cpdit::pipeline {

using models::flux::FluxConfig;

std::vector<std::string> preset_names() {
  return {"flux-tiny", "flux-mini", "wan-tiny",      "wan-mini", "qwen-mini",
          "skyreels-tiny", "skyreels-mini", "ltx-tiny", "ltx-mini"};
}

namespace {
std::string known_presets() {
  std::string list;
  for (const std::string& name : preset_names()) list += (list.empty() ? "" : ", ") + name;
  return list;
}
}  // namespace

void check_preset(const std::string& name) {
  const std::vector<std::string> names = preset_names();
  CPDIT_CHECK(std::find(names.begin(), names.end(), name) != names.end(), invalid_argument, "unknown preset '", name,
              "' (presets: ", known_presets(), ")");
}

models::LoadedModel preset_model(const std::string& name, uint64_t seed, const nn::LoadOptions& options) {
  check_preset(name);
  if (name.rfind("flux-", 0) == 0) return models::flux::share_flux(flux_preset(name, seed), options);
  if (name.rfind("qwen-", 0) == 0) return models::qwenimage::share_qwenimage(qwenimage_preset(name, seed), options);
  if (name.rfind("ltx-", 0) == 0) return models::ltx_video::share_ltx_video(ltx_preset(name, seed), options);
  if (name.rfind("skyreels-", 0) == 0)
    return models::share_weights("SkyReelsV2Transformer3DModel", skyreels_preset(name, seed),
                                 models::skyreels_v2::load_skyreels_v2, options);
  return models::wan::share_wan(wan_preset(name, seed), options);
}

FluxConfig flux_preset_config(const std::string& name) {
  FluxConfig c;
  c.in_channels = 64;
  c.patch_size = 1;
  if (name == "flux-tiny") {
    c.num_layers = 1;
    c.num_single_layers = 1;
    c.attention_head_dim = 16;
    c.num_attention_heads = 2;
    c.joint_attention_dim = 32;
    c.pooled_projection_dim = 32;
    c.guidance_embeds = false;
    c.axes_dims_rope = {4, 4, 8};
  } else if (name == "flux-mini") {
    c.num_layers = 2;
    c.num_single_layers = 4;
    c.attention_head_dim = 128;
    c.num_attention_heads = 24;
    c.joint_attention_dim = 4096;
    c.pooled_projection_dim = 768;
    c.guidance_embeds = true;
    c.axes_dims_rope = {16, 56, 56};
  } else {
    fail(ErrorKind::invalid_argument, "'", name, "' is not a FLUX.1 preset (presets: ", known_presets(), ")");
  }
  c.validate();
  return c;
}

// The SkyReels-V2 presets are Wan 2.1 networks of the same widths as the Wan ones.
models::wan::WanConfig wan_preset_config(const std::string& name) {
  models::wan::WanConfig c;
  c.in_channels = 16;
  c.out_channels = 16;
  c.freq_dim = 256;
  c.num_layers = 2;
  if (name == "wan-tiny" || name == "skyreels-tiny") {
    c.num_attention_heads = 2;
    c.attention_head_dim = 12;
    c.text_dim = 16;
    c.ffn_dim = 32;
    c.rope_max_seq_len = 32;
  } else if (name == "wan-mini" || name == "skyreels-mini") {
    c.num_attention_heads = 12;
    c.attention_head_dim = 128;
    c.text_dim = 4096;
    c.ffn_dim = 8960;
    c.rope_max_seq_len = 1024;
  } else {
    fail(ErrorKind::invalid_argument, "'", name, "' is not a Wan preset (presets: ", known_presets(), ")");
  }
  c.validate();
  return c;
}

namespace {

int64_t declared_parameters(nn::Module& model) {
  int64_t count = 0;
  for (const auto& [name, parameter] : model.named_parameters()) count += shape_numel(parameter->shape);
  return count;
}

models::skyreels_v2::SkyReelsV2Config skyreels_preset_config(const std::string& name) {
  CPDIT_CHECK(name == "skyreels-tiny" || name == "skyreels-mini", invalid_argument, "'", name,
              "' is not a SkyReels-V2 preset (presets: ", known_presets(), ")");
  models::skyreels_v2::SkyReelsV2Config config;
  static_cast<models::wan::WanConfig&>(config) = wan_preset_config(name);
  return config;
}

}  // namespace

models::qwenimage::QwenImageConfig qwenimage_preset_config(const std::string& name) {
  CPDIT_CHECK(name == "qwen-mini", invalid_argument, "'", name, "' is not a Qwen-Image preset (presets: ",
              known_presets(), ")");
  models::qwenimage::QwenImageConfig config;  // the class defaults are the released widths
  config.num_layers = 2;
  config.validate();
  return config;
}

int64_t preset_parameters(const std::string& name) {
  check_preset(name);
  if (name.rfind("flux-", 0) == 0) {
    models::flux::FluxTransformer2DModel model(flux_preset_config(name));
    return declared_parameters(model);
  }
  if (name.rfind("ltx-", 0) == 0) {
    models::ltx_video::LTXVideoTransformer3DModel model(ltx_preset_config(name));
    return declared_parameters(model);
  }
  if (name.rfind("wan-", 0) == 0) {
    models::wan::WanTransformer3DModel model(wan_preset_config(name));
    return declared_parameters(model);
  }
  if (name.rfind("skyreels-", 0) == 0) {
    models::skyreels_v2::SkyReelsV2Transformer3DModel model(skyreels_preset_config(name));
    return declared_parameters(model);
  }
  models::qwenimage::QwenImageTransformer2DModel model(qwenimage_preset_config(name));
  return declared_parameters(model);
}

models::wan::WanCheckpoint wan_preset(const std::string& name, uint64_t seed) {
  models::wan::WanConfig config = wan_preset_config(name);
  models::wan::WanTransformer3DModel shape_only(config);
  return {config, random_state_dict(shape_only, seed)};
}

models::qwenimage::QwenImageCheckpoint qwenimage_preset(const std::string& name, uint64_t seed) {
  const models::qwenimage::QwenImageConfig config = qwenimage_preset_config(name);
  models::qwenimage::QwenImageTransformer2DModel shape_only(config);
  return {config, random_state_dict(shape_only, seed)};
}

models::skyreels_v2::SkyReelsV2Checkpoint skyreels_preset(const std::string& name, uint64_t seed) {
  const models::skyreels_v2::SkyReelsV2Config config = skyreels_preset_config(name);
  models::skyreels_v2::SkyReelsV2Transformer3DModel shape_only(config);
  return {config, random_state_dict(shape_only, seed)};
}

UniPCConfig video_preset_scheduler(const std::string& name) {
  if (name == "skyreels-tiny" || name == "skyreels-mini")
    return UniPCConfig::wan21(skyreels_flow_shift(wan_preset_config(name)));
  wan_preset_config(name);  // refuses other names
  return UniPCConfig::wan21();
}

models::ltx_video::LtxVideoConfig ltx_preset_config(const std::string& name) {
  models::ltx_video::LtxVideoConfig c;  // the class defaults are the 2B widths
  c.num_layers = 2;
  if (name == "ltx-tiny") {
    c.num_attention_heads = 2;
    c.attention_head_dim = 12;
    c.in_channels = c.out_channels = 8;
    c.cross_attention_dim = 24;
    c.caption_channels = 16;
  } else {
    CPDIT_CHECK(name == "ltx-mini", invalid_argument, "'", name, "' is not an LTX-Video preset (presets: ",
                known_presets(), ")");
  }
  c.validate();
  return c;
}

models::ltx_video::LtxVideoCheckpoint ltx_preset(const std::string& name, uint64_t seed) {
  const models::ltx_video::LtxVideoConfig config = ltx_preset_config(name);
  models::ltx_video::LTXVideoTransformer3DModel shape_only(config);
  return {config, random_state_dict(shape_only, seed)};
}

FlowMatchEulerConfig flux_preset_scheduler(const std::string& name) {
  flux_preset_config(name);  // refuses other names
  return name == "flux-mini" ? FlowMatchEulerConfig::flux_dev() : FlowMatchEulerConfig::flux_schnell();
}

models::flux::FluxCheckpoint flux_preset(const std::string& name, uint64_t seed) {
  FluxConfig config = flux_preset_config(name);
  models::flux::FluxTransformer2DModel shape_only(config);
  return {config, random_state_dict(shape_only, seed)};
}

nn::StateDict random_state_dict(nn::Module& model, uint64_t seed) {
  nn::StateDict state;
  uint64_t stream = 0;
  for (auto& [name, param] : model.named_parameters()) {
    Tensor t = Tensor::empty(param->shape);
    float* p = t.data<float>();
    const int64_t n = t.numel();
    const bool matrix = param->shape.size() >= 2;
    // Norm gains: vectors named *.weight, and the Wan VAE's RMS-norm *.gamma (shaped (C, 1, 1[, 1])).
    const bool gain = (!matrix && name.ends_with(".weight")) || name.ends_with(".gamma");
    if (gain) {
      for (int64_t i = 0; i < n; ++i) p[i] = 1.0f;
    } else {
      // PyTorch's default Linear initialisation: U(-1/sqrt(fan_in), 1/sqrt(fan_in)); biases small.
      const float bound = matrix ? float(1.0 / std::sqrt(double(n / param->shape[0]))) : 0.02f;
      // Each parameter draws from its own stretch of the stream, so the values do not depend on
      // how the work is split across threads.
      const int64_t chunk = 1 << 16;
#pragma omp parallel for num_threads(compute_threads()) schedule(static)
      for (int64_t begin = 0; begin < n; begin += chunk)
        fill_uniform(seed, stream + uint64_t(begin), p + begin, std::min(chunk, n - begin), -bound, bound);
    }
    stream += uint64_t(n);
    state.emplace(name, std::move(t));
  }
  return state;
}

}  // namespace cpdit::pipeline
