#include "models/vae/single_file.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/safetensors.hpp>

#include <algorithm>
#include <map>
#include <regex>

namespace cpdit::models::vae::detail {

namespace {

// FLUX.1's released VAE (black-forest-labs/FLUX.1-dev vae/config.json): what its shapes do not tell.
constexpr int64_t kFluxNormGroups = 32;
constexpr double kFluxScalingFactor = 0.3611, kFluxShiftFactor = 0.1159;
constexpr int64_t kFluxLatentChannels = 16;
const std::vector<int64_t> kFluxChannels = {128, 256, 512, 512};

// Wan 2.1's (and Qwen-Image's, the same values) per-channel latent statistics.
const std::vector<double> kWan21LatentsMean = {-0.7571, -0.7089, -0.9113, 0.1075, -0.1745, 0.9653,
                                               -0.1517, 1.5508,  0.4134,  -0.0715, 0.5517, -0.3632,
                                               -0.1922, -0.9497, 0.2503,  -0.2921};
const std::vector<double> kWan21LatentsStd = {2.8184, 1.4541, 2.3275, 2.6558, 1.2196, 1.7708, 2.6052, 2.0743,
                                              3.2687, 2.1526, 2.8652, 1.5579, 1.6382, 1.1253, 2.8251, 1.916};

bool holds_tensor(const nn::StateDict& state, const std::string& name) { return state.count(name) > 0; }

const Shape& shape_in(const nn::StateDict& state, const std::string& name, const std::string& source) {
  const auto it = state.find(name);
  CPDIT_CHECK(it != state.end(), invalid_argument, "VAE ", source, ": no tensor ", name,
              " to read the config from (give the VAE's config.json)");
  return it->second.shape();
}

// The numbered entries `prefix`N. present, in order.
std::vector<int> numbered_under(const nn::StateDict& state, const std::string& prefix) {
  std::vector<int> out;
  for (const auto& [name, weight] : state) {
    if (name.rfind(prefix, 0) != 0) continue;
    const size_t dot = name.find('.', prefix.size());
    const std::string index = name.substr(prefix.size(), dot - prefix.size());
    // Six digits at most, as the rename patterns take them: a longer number stays an unexpected name.
    if (index.empty() || index.size() > 6 || index.find_first_not_of("0123456789") != std::string::npos) continue;
    const int i = std::stoi(index);
    if (out.empty() || out.back() != i) out.push_back(i);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// One rename rule: a key matching `pattern` becomes `format` ($1, $2 as std::regex_replace writes them).
struct RenameRule {
  std::regex pattern;
  std::string format;
};

std::string renamed_by(const std::string& name, const std::vector<RenameRule>& rules) {
  for (const RenameRule& rule : rules)
    if (std::regex_match(name, rule.pattern)) return std::regex_replace(name, rule.pattern, rule.format);
  return name;
}

// A resnet's inner names in the LDM layout (nin_shortcut) and in Wan's (residual.N, shortcut).
std::string ldm_resnet(const std::string& rest) { return rest.rfind("nin_shortcut", 0) == 0 ? "conv_shortcut" + rest.substr(12) : rest; }

// FLUX.1's ae.safetensors: encoder.down.I.block.J, decoder.up.I (numbered from the lowest resolution,
// diffusers' up_blocks from the highest), mid.block_1/2, mid.attn_1 with 1x1-convolution q/k/v/proj_out.
nn::StateDict kl_from_ldm_names(const nn::StateDict& state) {
  const std::vector<int> ups = numbered_under(state, "decoder.up.");
  const int levels = ups.empty() ? 0 : ups.back() + 1;
  static const std::regex down_block(R"(encoder\.down\.(\d{1,6})\.block\.(\d{1,6})\.(.+))");
  static const std::regex down_sample(R"(encoder\.down\.(\d{1,6})\.downsample\.(.+))");
  static const std::regex up_block(R"(decoder\.up\.(\d{1,6})\.block\.(\d{1,6})\.(.+))");
  static const std::regex up_sample(R"(decoder\.up\.(\d{1,6})\.upsample\.(.+))");
  static const std::regex mid_block(R"((encoder|decoder)\.mid\.block_([12])\.(.+))");
  static const std::regex mid_attn(R"((encoder|decoder)\.mid\.attn_1\.(norm|q|k|v|proj_out)\.(weight|bias))");
  static const std::regex norm_out(R"((encoder|decoder)\.norm_out\.(.+))");
  static const std::map<std::string, std::string> attn = {
      {"norm", "group_norm"}, {"q", "to_q"}, {"k", "to_k"}, {"v", "to_v"}, {"proj_out", "to_out.0"}};
  nn::StateDict out;
  for (const auto& [name, weight] : state) {
    std::smatch m;
    std::string to = name;
    Weight w = weight;
    if (std::regex_match(name, m, down_block)) {
      to = "encoder.down_blocks." + m[1].str() + ".resnets." + m[2].str() + "." + ldm_resnet(m[3]);
    } else if (std::regex_match(name, m, down_sample)) {
      to = "encoder.down_blocks." + m[1].str() + ".downsamplers.0." + m[2].str();
    } else if (std::regex_match(name, m, up_block)) {
      to = "decoder.up_blocks." + std::to_string(levels - 1 - std::stoi(m[1])) + ".resnets." + m[2].str() + "." +
           ldm_resnet(m[3]);
    } else if (std::regex_match(name, m, up_sample)) {
      to = "decoder.up_blocks." + std::to_string(levels - 1 - std::stoi(m[1])) + ".upsamplers.0." + m[2].str();
    } else if (std::regex_match(name, m, mid_block)) {
      to = m[1].str() + ".mid_block.resnets." + (m[2] == "1" ? "0" : "1") + "." + ldm_resnet(m[3]);
    } else if (std::regex_match(name, m, mid_attn)) {
      to = m[1].str() + ".mid_block.attentions.0." + attn.at(m[2]) + "." + m[3].str();
      // The original's attention projections are 1x1 convolutions; diffusers' are Linear layers.
      const Shape& s = weight.shape();
      if (m[3] == "weight" && s.size() == 4 && s[2] == 1 && s[3] == 1) w = weight.values(name.c_str()).reshape({s[0], s[1]});
    } else if (std::regex_match(name, m, norm_out)) {
      to = m[1].str() + ".conv_norm_out." + m[2].str();
    }
    CPDIT_CHECK(out.emplace(to, w).second, invalid_argument, "VAE: tensors ", name, " and another both name ", to);
  }
  return out;
}

// Wan 2.1's VAE: conv1/head.0/head.2 around each side, middle.0-2, residual.N inside a resnet, the
// encoder's downsamples flat (as diffusers' down_blocks), the decoder's upsamples flat (diffusers groups
// them into up_blocks: each level's resnets, then its upsampler).
nn::StateDict wan_from_original_names(const nn::StateDict& state) {
  static const std::vector<RenameRule> resnet = {
      {std::regex(R"(residual\.0\.(.+))"), "norm1.$1"}, {std::regex(R"(residual\.2\.(.+))"), "conv1.$1"},
      {std::regex(R"(residual\.3\.(.+))"), "norm2.$1"}, {std::regex(R"(residual\.6\.(.+))"), "conv2.$1"},
      {std::regex(R"(shortcut\.(.+))"), "conv_shortcut.$1"}};
  // The decoder's flat upsamples.K: level and place of each.
  std::map<int, std::string> up_place;
  int level = 0, j = 0;
  for (int k : numbered_under(state, "decoder.upsamples.")) {
    const std::string p = "decoder.upsamples." + std::to_string(k) + ".";
    const bool resample = holds_tensor(state, p + "resample.1.weight");
    up_place[k] = "decoder.up_blocks." + std::to_string(level) + (resample ? ".upsamplers.0." : ".resnets." + std::to_string(j++) + ".");
    if (resample) ++level, j = 0;
  }
  static const std::regex side(R"((encoder|decoder)\.(conv1|head\.0|head\.2)\.(.+))");
  static const std::regex middle(R"((encoder|decoder)\.middle\.([012])\.(.+))");
  static const std::regex down(R"(encoder\.downsamples\.(\d{1,6})\.(.+))");
  static const std::regex up(R"(decoder\.upsamples\.(\d{1,6})\.(.+))");
  static const std::regex top(R"((conv1|conv2)\.(.+))");
  auto inner = [&](const std::string& rest) { return renamed_by(rest, resnet); };
  nn::StateDict out;
  for (const auto& [name, weight] : state) {
    std::smatch m;
    std::string to = name;
    if (std::regex_match(name, m, side)) {
      const std::string part = m[2] == "conv1" ? "conv_in" : m[2] == "head.0" ? "norm_out" : "conv_out";
      to = m[1].str() + "." + part + "." + m[3].str();
    } else if (std::regex_match(name, m, middle)) {
      to = m[1].str() + (m[2] == "1" ? ".mid_block.attentions.0." + m[3].str()
                                     : ".mid_block.resnets." + std::string(m[2] == "0" ? "0" : "1") + "." + inner(m[3]));
    } else if (std::regex_match(name, m, down)) {
      to = "encoder.down_blocks." + m[1].str() + "." + inner(m[2]);
    } else if (std::regex_match(name, m, up)) {
      to = up_place.at(std::stoi(m[1])) + inner(m[2]);
    } else if (std::regex_match(name, m, top)) {
      to = (m[1] == "conv1" ? "quant_conv." : "post_quant_conv.") + m[2].str();
    }
    CPDIT_CHECK(out.emplace(to, weight).second, invalid_argument, "VAE: tensors ", name, " and another both name ", to);
  }
  return out;
}

bool ldm_kl_names(const nn::StateDict& s) { return holds_tensor(s, "decoder.mid.block_1.conv1.weight") && holds_tensor(s, "encoder.down.0.block.0.conv1.weight"); }
bool wan_original_names(const nn::StateDict& s) { return holds_tensor(s, "decoder.middle.0.residual.0.gamma"); }

nlohmann::json kl_config_of(const nn::StateDict& s, const std::string& source) {
  nlohmann::json c = {{"_class_name", "AutoencoderKL"}};
  std::vector<int64_t> channels;
  for (int level : numbered_under(s, "encoder.down_blocks."))
    channels.push_back(shape_in(s, "encoder.down_blocks." + std::to_string(level) + ".resnets.0.conv1.weight", source)[0]);
  c["block_out_channels"] = channels;
  c["layers_per_block"] = numbered_under(s, "encoder.down_blocks.0.resnets.").size();
  c["in_channels"] = shape_in(s, "encoder.conv_in.weight", source)[1];
  c["out_channels"] = shape_in(s, "decoder.conv_out.weight", source)[0];
  const int64_t latent = shape_in(s, "decoder.conv_in.weight", source)[1];
  c["latent_channels"] = latent;
  c["use_quant_conv"] = holds_tensor(s, "quant_conv.weight");
  c["use_post_quant_conv"] = holds_tensor(s, "post_quant_conv.weight");
  c["mid_block_add_attention"] = holds_tensor(s, "decoder.mid_block.attentions.0.to_q.weight");
  const bool flux = latent == kFluxLatentChannels && channels == kFluxChannels && !holds_tensor(s, "quant_conv.weight");
  CPDIT_CHECK(flux, invalid_argument, "VAE ", source, ": an AutoencoderKL of ", latent, " latent channels and ",
              c["block_out_channels"].dump(), " block channels is not FLUX.1's ae (16 and [128,256,512,512]), the only "
              "one whose norm groups and scaling are known here: give its config.json (--vae-config)");
  c["norm_num_groups"] = kFluxNormGroups;
  c["scaling_factor"] = kFluxScalingFactor;
  c["shift_factor"] = kFluxShiftFactor;
  return c;
}

nlohmann::json wan_vae_config_of(const nn::StateDict& s, const std::string& source) {
  nlohmann::json c = {{"_class_name", "AutoencoderKLWan"}, {"attn_scales", nlohmann::json::array()}};
  const int64_t base = shape_in(s, "encoder.conv_in.weight", source)[0];
  c["base_dim"] = base;
  c["in_channels"] = shape_in(s, "encoder.conv_in.weight", source)[1];
  c["out_channels"] = shape_in(s, "decoder.conv_out.weight", source)[0];
  const int64_t z = shape_in(s, "decoder.conv_in.weight", source)[1];
  c["z_dim"] = z;
  // The encoder's flat down_blocks: each level's resnets, then (but after the last) a resample whose
  // time_conv says it also halves the frames.
  std::vector<int64_t> dim_mult;
  std::vector<bool> temporal;
  int64_t resnets = 0, per_level = -1;
  for (int k : numbered_under(s, "encoder.down_blocks.")) {
    const std::string p = "encoder.down_blocks." + std::to_string(k) + ".";
    if (holds_tensor(s, p + "resample.1.weight")) {
      temporal.push_back(holds_tensor(s, p + "time_conv.weight"));
      CPDIT_CHECK(per_level < 0 || per_level == resnets, invalid_argument, "VAE ", source,
                  ": the encoder's levels hold different numbers of resnets");
      per_level = resnets, resnets = 0;
      continue;
    }
    if (resnets++ == 0) dim_mult.push_back(shape_in(s, p + "conv1.weight", source)[0] / base);
  }
  CPDIT_CHECK(per_level < 0 || per_level == resnets, invalid_argument, "VAE ", source,
              ": the encoder's levels hold different numbers of resnets");
  c["dim_mult"] = dim_mult;
  c["num_res_blocks"] = resnets;
  c["temperal_downsample"] = temporal;
  CPDIT_CHECK(!dim_mult.empty() && dim_mult[0] > 0, invalid_argument, "VAE ", source, ": no encoder resnets to read dim_mult from");
  // The decoder ends at decoder_base_dim * dim_mult[0] channels (diffusers' default: base_dim).
  const int64_t decoder_base = shape_in(s, "decoder.norm_out.gamma", source)[0] / dim_mult[0];
  if (decoder_base != base) c["decoder_base_dim"] = decoder_base;
  CPDIT_CHECK(z == int64_t(kWan21LatentsMean.size()), invalid_argument, "VAE ", source, ": a Wan VAE of ", z,
              " latent channels is not Wan 2.1's or Qwen-Image's, whose latent statistics are the only ones known here: "
              "give its config.json (--vae-config)");
  c["latents_mean"] = kWan21LatentsMean;
  c["latents_std"] = kWan21LatentsStd;
  return c;
}

}  // namespace

std::optional<std::string> single_file_vae_class(const io::Checkpoint& checkpoint) {
  auto holds = [&](const char* name) { return checkpoint.contains(name); };
  if ((holds("decoder.mid.block_1.conv1.weight") && holds("encoder.down.0.block.0.conv1.weight")) ||
      (holds("decoder.mid_block.resnets.0.norm1.weight") && holds("encoder.down_blocks.0.resnets.0.conv1.weight")))
    return "AutoencoderKL";
  if (holds("decoder.middle.0.residual.0.gamma") ||
      (holds("decoder.mid_block.resnets.0.norm1.gamma") && holds("encoder.down_blocks.0.conv1.weight")))
    return "AutoencoderKLWan";
  return std::nullopt;
}

nn::StateDict vae_in_diffusers_names(const nn::StateDict& state) {
  if (ldm_kl_names(state)) return kl_from_ldm_names(state);
  if (wan_original_names(state)) return wan_from_original_names(state);
  return state;
}

nlohmann::json vae_config_from_shapes(const std::string& class_name, const nn::StateDict& state,
                                      const std::string& source) {
  if (class_name == "AutoencoderKL") return kl_config_of(state, source);
  CPDIT_CHECK(class_name == "AutoencoderKLWan" || class_name == "AutoencoderKLQwenImage", invalid_argument, "VAE ",
              source, ": a ", class_name, " needs its config.json (give the folder, or --vae-config)");
  nlohmann::json c = wan_vae_config_of(state, source);
  c["_class_name"] = class_name;
  return c;
}

}  // namespace cpdit::models::vae::detail
