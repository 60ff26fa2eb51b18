// LoRA modules matched to a model's Linear layers (nn/lora.hpp): every name a file may give a layer —
// the model's path, the release's name, either with dots as kohya's underscores — built once from the
// model's own tree, then each module looked up in it.
#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/nn/key_layout.hpp>
#include <cpdit/nn/lora.hpp>

#include <algorithm>
#include <cmath>

namespace cpdit::nn {
namespace {

std::string underscored(std::string name) {
  std::replace(name.begin(), name.end(), '.', '_');
  return name;
}

// A layer a name covers: the layer, and where its output rows start in that name's up matrix (a fused
// layer of the release covers its parts' rows one after another).
struct Target {
  std::string path;
  Linear* linear = nullptr;
  int64_t row = 0;
};
using Names = std::map<std::string, std::vector<Target>>;

Names layer_names(Module& model, const KeyLayout* original_names) {
  Names names;
  // A fused layer's parts by index, filled as the tree walk meets them.
  std::map<std::string, std::vector<Target>> fused;
  for (const auto& [path, module] : model.named_modules()) {
    auto* linear = dynamic_cast<Linear*>(module);
    if (linear == nullptr) continue;
    const Target whole{path, linear, 0};
    names[path].push_back(whole);
    names["lora_transformer_" + underscored(path)].push_back(whole);
    const std::optional<OriginalName> original = original_names ? original_name(path, *original_names) : std::nullopt;
    if (!original) continue;
    if (original->part < 0) {
      names[original->name].push_back(whole);
      names["lora_unet_" + underscored(original->name)].push_back(whole);
    } else {
      std::vector<Target>& parts = fused[original->name];
      parts.resize(size_t(original->parts));
      parts[size_t(original->part)] = whole;
    }
  }
  for (auto& [name, parts] : fused) {
    // Every part must be in the model for the fused name to mean the whole (else it names nothing).
    if (std::any_of(parts.begin(), parts.end(), [](const Target& t) { return t.linear == nullptr; })) continue;
    int64_t row = 0;
    for (Target& part : parts) {
      part.row = row;
      row += part.linear->out_features();
    }
    names[name] = parts;
    names["lora_unet_" + underscored(name)] = parts;
  }
  return names;
}

}  // namespace

LoraMatch match_lora(Module& model, const LoraFile& file, const KeyLayout* original_names) {
  const Names names = layer_names(model, original_names);
  LoraMatch match;
  for (const LoraModule& m : file.modules) {
    const auto it = names.find(m.name);
    if (it == names.end()) {
      match.unmatched.push_back(m.name);
      continue;
    }
    for (const Target& t : it->second) match.layers[m.name].push_back(t.path);
  }
  return match;
}

LoraDeltas lora_deltas(Module& model, const std::vector<LoraUse>& uses, const KeyLayout* original_names,
                       const std::string& model_name) {
  const Names names = layer_names(model, original_names);
  // Each layer's (down, scaled up) pairs, stacked at the end.
  std::map<std::string, std::pair<std::vector<Tensor>, std::vector<Tensor>>> parts;
  for (const LoraUse& use : uses) {
    const LoraFile& file = *use.file;
    CPDIT_CHECK(std::isfinite(use.weight), invalid_argument, "LoRA ", file.path, ": weight ", use.weight,
                " is not a finite number");
    size_t unmatched = 0;
    std::string first_unmatched;
    for (const LoraModule& m : file.modules) {
      const auto it = names.find(m.name);
      if (it == names.end()) {
        if (unmatched++ == 0) first_unmatched = m.name;
        continue;
      }
      const std::vector<Target>& targets = it->second;
      const Linear& last = *targets.back().linear;
      const int64_t rows = targets.back().row + last.out_features();
      CPDIT_CHECK(m.down.size(1) == last.in_features() && m.up.size(0) == rows, invalid_argument, "LoRA ", file.path,
                  ": module ", m.name, " maps ", m.down.size(1), " features to ", m.up.size(0), ", but ",
                  targets.size() == 1 ? "its layer " + targets[0].path : "its " + std::to_string(targets.size()) +
                  " layers from " + targets[0].path, " of ", model_name, " map ", last.in_features(), " to ", rows,
                  " (a LoRA for another model or size?)");
      if (use.weight == 0) continue;
      const float factor = float(m.scale * use.weight);
      for (const Target& t : targets) {
        Tensor up = m.up.narrow(0, t.row, t.linear->out_features()).clone();
        float* v = up.data<float>();
        for (int64_t i = 0; i < up.numel(); ++i) v[i] *= factor;
        parts[t.path].first.push_back(m.down);
        parts[t.path].second.push_back(up);
      }
    }
    CPDIT_CHECK(unmatched == 0, invalid_argument, "LoRA ", file.path, ": ", unmatched, " of ", file.modules.size(),
                " modules name no layer of ", model_name, " (e.g. '", first_unmatched,
                "'): a LoRA for another model?");
  }
  LoraDeltas deltas;
  for (auto& [path, p] : parts)
    deltas[path] = {p.first.size() == 1 ? p.first[0] : cat(p.first, 0),
                    p.second.size() == 1 ? p.second[0] : cat(p.second, 1)};
  return deltas;
}

MergedWeights merged_weights(Module& model, const LoraDeltas& deltas, const std::string& model_name) {
  MergedWeights merged;
  for (const auto& [path, delta] : deltas) {
    const auto* linear = dynamic_cast<const Linear*>(model.find(path));
    CPDIT_CHECK(linear != nullptr, internal, "LoRA: ", path, " is no Linear of ", model_name);
    const Weight& w = linear->weight();
    CPDIT_CHECK(!w.is_quantised(), unsupported, "LoRA: merging needs dense weights, but ", path, " of ", model_name,
                " is ", w.format(), ": apply the adapter unmerged (without --lora-merge / fuse_lora)");
    const Tensor& values = w.values("LoRA merging");
    Tensor sum = values.dtype() == DType::f32 ? values.clone() : values.to(DType::f32);  // one copy, ours
    const int64_t out = sum.size(0), in = sum.size(1), rank = delta.down.size(0);
    kernels::gemm(false, false, out, in, rank, 1.0f, delta.up.contiguous().data<float>(), rank,
                  delta.down.contiguous().data<float>(), in, 1.0f, sum.data<float>(), in);
    merged[path] = w.dtype() == DType::f32 ? sum : sum.to(w.dtype());
  }
  return merged;
}

LoraApplication lora_application(Module& model, const std::vector<LoraUse>& uses, const KeyLayout* original_names,
                                 const std::string& model_name) {
  std::vector<LoraUse> beside, merged;
  for (const LoraUse& use : uses) (use.merge ? merged : beside).push_back(use);
  LoraApplication lora;
  lora.deltas = lora_deltas(model, beside, original_names, model_name);
  if (!merged.empty())
    lora.merged = merged_weights(model, lora_deltas(model, merged, original_names, model_name), model_name);
  // Weights of the run, held once for every replica: counted where the summary counts weights.
  for (const auto& [path, delta] : lora.deltas) {
    delta.down.charge_to(weight_memory_counter());
    delta.up.charge_to(weight_memory_counter());
  }
  for (const auto& [path, weight] : lora.merged) weight.charge_to(weight_memory_counter());
  return lora;
}

void apply_lora(Module& model, const LoraApplication& lora) {
  size_t deltas = 0, merged = 0;
  for (const auto& [path, module] : model.named_modules()) {
    auto* linear = dynamic_cast<Linear*>(module);
    if (linear == nullptr) continue;
    const auto delta = lora.deltas.find(path);
    linear->set_delta(delta == lora.deltas.end() ? LowRankDelta{} : delta->second);
    deltas += delta != lora.deltas.end();
    if (const auto weight = lora.merged.find(path); weight != lora.merged.end()) {
      for (auto& [name, parameter] : linear->named_parameters())
        if (name == "weight") parameter->value = weight->second;
      ++merged;
    }
  }
  CPDIT_CHECK(deltas == lora.deltas.size() && merged == lora.merged.size(), internal,
              "LoRA: some deltas or merged weights name no Linear of the model they were made for");
}

}  // namespace cpdit::nn
