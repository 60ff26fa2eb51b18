// read_lora (nn/lora.hpp): a LoRA file's tensors grouped into modules, its layout told by their names,
// every shape and value checked before anything is applied. It reads no model, so the safetensors
// fuzzer runs it over its inputs too (fuzz/fuzz_safetensors.cpp).
#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/nn/lora.hpp>

#include <cmath>
#include <optional>

namespace cpdit::nn {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The prefixes trainers put before the transformer's module names: PEFT's (on the pipeline component
// or the raw model), ComfyUI's and the original releases'.
std::string without_prefix(const std::string& name) {
  for (const char* prefix : {"base_model.model.", "transformer.", "model.diffusion_model.", "diffusion_model."})
    if (name.rfind(prefix, 0) == 0) return name.substr(std::string(prefix).size());
  return name;
}

enum class Part { down, up, alpha };

// XLabs' FLUX.1 LoRA names (`double_blocks.N.processor.qkv_lora1.down.weight`, no alpha): each block's
// processor stem and what it covers, as diffusers' XLabs conversion maps them — the release's names,
// or diffusers' parts when a stem covers several layers (the single blocks' qkv, which is not linear1:
// its up rows are cut in equal parts).
struct XlabsStem {
  const char* block;
  const char* stem;
  const char* to_block;
  std::vector<const char*> to;
};
const XlabsStem kXlabsStems[] = {
    {"double_blocks", "processor.qkv_lora1", "double_blocks", {"img_attn.qkv"}},
    {"double_blocks", "processor.proj_lora1", "double_blocks", {"img_attn.proj"}},
    {"double_blocks", "processor.qkv_lora2", "double_blocks", {"txt_attn.qkv"}},
    {"double_blocks", "processor.proj_lora2", "double_blocks", {"txt_attn.proj"}},
    {"single_blocks", "processor.qkv_lora", "single_transformer_blocks", {"attn.to_q", "attn.to_k", "attn.to_v"}},
    {"single_blocks", "processor.proj_lora", "single_blocks", {"linear2"}},
};

bool xlabs_name(const std::string& name) { return name.find(".processor.") != std::string::npos; }

// The part a tensor is by its name's ending, and the module name before it.
std::optional<std::pair<std::string, Part>> lora_part(const std::string& name) {
  static const std::pair<const char*, Part> kEndings[] = {
      {".lora_A.weight", Part::down},   {".lora_B.weight", Part::up}, {".lora_down.weight", Part::down},
      {".lora_up.weight", Part::up},    {".alpha", Part::alpha},
  };
  for (const auto& [ending, part] : kEndings)
    if (ends_with(name, ending))
      return std::make_pair(without_prefix(name.substr(0, name.size() - std::string(ending).size())), part);
  if (xlabs_name(name))
    for (const auto& [ending, part] : {std::pair{".down.weight", Part::down}, std::pair{".up.weight", Part::up}})
      if (ends_with(name, ending))
        return std::make_pair(without_prefix(name.substr(0, name.size() - std::string(ending).size())), part);
  return std::nullopt;
}

// An XLabs module as the modules it covers (one, or the equal row parts of its up); others unchanged.
std::vector<LoraModule> xlabs_modules(LoraModule m) {
  for (const XlabsStem& x : kXlabsStems) {
    const std::string head = std::string(x.block) + ".";
    if (m.name.rfind(head, 0) != 0) continue;
    const size_t dot = m.name.find('.', head.size());
    if (dot == std::string::npos || m.name.substr(dot + 1) != x.stem) continue;
    const std::string block = std::string(x.to_block) + "." + m.name.substr(head.size(), dot - head.size()) + ".";
    const int64_t parts = int64_t(x.to.size()), rows = m.up.size(0) / parts;
    CPDIT_CHECK(rows * parts == m.up.size(0), format, "LoRA: XLabs module ", m.name, " has ", m.up.size(0),
                " up rows, which do not split into ", parts, " equal parts");
    std::vector<LoraModule> out;
    for (int64_t i = 0; i < parts; ++i)
      out.push_back({block + x.to[size_t(i)], m.down, parts == 1 ? m.up : m.up.narrow(0, i * rows, rows), m.scale});
    return out;
  }
  return {std::move(m)};
}

struct Parts {
  Tensor down, up;
  std::optional<double> alpha;
  std::string down_name, up_name;
};

void check_finite(const Tensor& t, const std::string& path, const std::string& name) {
  const float* v = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    CPDIT_CHECK(std::isfinite(v[i]), format, "LoRA ", path, ": tensor ", name, " holds NaN or Inf");
}

// PEFT's LoraConfig as diffusers' save_lora_weights keeps it in the metadata ("transformer.lora_alpha",
// or unprefixed from older writers): the alpha every module shares, and whether the scale is
// rank-stabilised. Per-module patterns and DoRA are refused: their scales are not the one alpha.
struct PeftConfig {
  std::optional<double> alpha;
  bool rslora = false;
};

PeftConfig peft_config(const io::SafetensorsFile& file) {
  PeftConfig config;
  const auto& metadata = file.metadata();
  const auto it = metadata.find("lora_adapter_metadata");
  if (it == metadata.end()) return config;
  const nlohmann::json j = io::parse_json(it->second, file.path() + " metadata lora_adapter_metadata");
  CPDIT_CHECK(j.is_object(), format, "LoRA ", file.path(), ": metadata lora_adapter_metadata is not a JSON object");
  auto field = [&](const std::string& key) -> const nlohmann::json* {
    for (const std::string& name : {"transformer." + key, key})
      if (j.contains(name) && !j[name].is_null()) return &j[name];
    return nullptr;
  };
  if (const nlohmann::json* alpha = field("lora_alpha")) {
    CPDIT_CHECK(alpha->is_number() && std::isfinite(alpha->get<double>()), format, "LoRA ", file.path(),
                ": metadata lora_alpha is not a finite number");
    config.alpha = alpha->get<double>();
  }
  if (const nlohmann::json* rslora = field("use_rslora")) config.rslora = rslora->is_boolean() && rslora->get<bool>();
  for (const char* pattern : {"alpha_pattern", "rank_pattern"})
    if (const nlohmann::json* p = field(pattern))
      CPDIT_CHECK(!p->is_object() || p->empty(), unsupported, "LoRA ", file.path(), ": per-module ", pattern,
                  " is not supported (every module takes the one lora_alpha)");
  if (const nlohmann::json* dora = field("use_dora"))
    CPDIT_CHECK(!dora->is_boolean() || !dora->get<bool>(), unsupported, "LoRA ", file.path(),
                ": DoRA adapters (use_dora) are not supported");
  return config;
}

}  // namespace

LoraFile read_lora(const std::string& path) { return read_lora(io::SafetensorsFile::open(path)); }

LoraFile read_lora(const io::SafetensorsFile& file) {
  const std::string& path = file.path();
  std::map<std::string, Parts> modules;
  bool peft_names = false, kohya_names = false, xlabs = false;
  for (const std::string& name : file.names()) {
    const auto part = lora_part(name);
    CPDIT_CHECK(!name.starts_with("lora_te") && !name.starts_with("text_encoder"), unsupported, "LoRA ", path,
                ": tensor ", name, " adapts a text encoder, which cpdit does not (its adapters are the transformer's)");
    CPDIT_CHECK(part, unsupported, "LoRA ", path, ": tensor ", name, " is not a LoRA down, up or alpha tensor "
                "(cpdit applies plain LoRA: lora_A/lora_B or lora_down/lora_up, with .alpha; not LoHa, LoKr or DoRA)");
    peft_names = peft_names || ends_with(name, ".lora_A.weight");
    xlabs = xlabs || xlabs_name(name);
    kohya_names = kohya_names || name.rfind("lora_unet_", 0) == 0 || name.rfind("lora_transformer_", 0) == 0;
    const Tensor t = file.get(name).to(DType::f32);
    check_finite(t, path, name);
    Parts& m = modules[part->first];
    if (part->second == Part::alpha) {
      CPDIT_CHECK(t.numel() == 1, format, "LoRA ", path, ": ", name, " must be one number, got ", t.describe());
      m.alpha = double(t.data<float>()[0]);
    } else {
      CPDIT_CHECK(t.dim() == 2, format, "LoRA ", path, ": ", name, " must be a matrix, got ", t.describe());
      (part->second == Part::down ? m.down : m.up) = t;
      (part->second == Part::down ? m.down_name : m.up_name) = name;
    }
  }
  CPDIT_CHECK(!modules.empty(), format, "LoRA ", path, " holds no tensors");
  const PeftConfig peft = peft_config(file);
  LoraFile lora;
  lora.path = path;
  lora.layout = xlabs          ? "XLabs (down, up)"
                : kohya_names  ? "kohya (lora_down, lora_up, alpha)"
                : !peft_names ? "ComfyUI (lora_down, lora_up, alpha)"
                : file.metadata().count("lora_adapter_metadata") ? "diffusers/PEFT (lora_A, lora_B, metadata)"
                                                                 : "PEFT names (lora_A, lora_B)";
  for (auto& [name, m] : modules) {
    CPDIT_CHECK(m.down.defined() && m.up.defined(), format, "LoRA ", path, ": module ", name, " has ",
                m.down.defined() ? "a down matrix but no up" : "no down matrix");
    const int64_t rank = m.down.size(0);
    CPDIT_CHECK(rank > 0 && m.up.size(1) == rank, format, "LoRA ", path, ": module ", name, ": ", m.down_name,
                " has rank ", rank, " but ", m.up_name, " has ", m.up.size(1));
    const std::optional<double> alpha = m.alpha ? m.alpha : peft.alpha;
    const double scale = !alpha ? 1.0 : *alpha / (peft.rslora && !m.alpha ? std::sqrt(double(rank)) : double(rank));
    for (LoraModule& part : xlabs_modules({name, m.down, m.up, scale})) lora.modules.push_back(std::move(part));
  }
  return lora;
}

}  // namespace cpdit::nn
