#include <cpdit/core/error.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/nn/key_layout.hpp>

namespace cpdit::nn {

const std::string kDiffusionModelPrefix = "model.diffusion_model.";

namespace {
bool has_prefix(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// `to` (with `rest`'s .weight / .bias suffix) when `rest` is the stem `from` or the stem and a suffix.
std::optional<std::string> renamed_stem(const std::string& rest, const StemRenames& stems) {
  for (const auto& [from, to] : stems) {
    if (rest == from) return to;  // a tensor named without suffix (Wan's modulation, FLUX's ".scale" entries)
    for (const char* suffix : {".weight", ".bias"})
      if (rest == from + suffix) return to + suffix;
  }
  return std::nullopt;
}
}  // namespace

bool contains_key(const io::Checkpoint& checkpoint, const std::string& name) {
  return checkpoint.contains(name) || checkpoint.contains(kDiffusionModelPrefix + name);
}

bool contains_key(const StateDict& state, const std::string& name) {
  return state.count(name) || state.count(kDiffusionModelPrefix + name);
}

StateDict without_prefix(const StateDict& state) {
  bool prefixed = false;
  for (const auto& [name, w] : state) prefixed = prefixed || has_prefix(name, kDiffusionModelPrefix);
  if (!prefixed) return state;
  StateDict out;
  for (const auto& [name, w] : state) {
    if (!has_prefix(name, kDiffusionModelPrefix)) continue;
    const std::string bare = name.substr(kDiffusionModelPrefix.size());
    // A single file's other components (vae., text_encoders.) are left out; the same tensor twice is
    // refused, since which of the two is the model's cannot be told.
    CPDIT_CHECK(!state.count(bare), format, "the checkpoint holds both ", name, " and ", bare,
                ": one tensor under two names");
    out[bare] = w;
  }
  return out;
}

std::optional<std::string> renamed_key(const std::string& name, const KeyLayout& layout) {
  for (const BlockRenames& block : layout.blocks) {
    // "<from>.N.<rest>"
    if (!has_prefix(name, block.from + ".")) continue;
    const size_t start = block.from.size() + 1, dot = name.find('.', start);
    if (dot == std::string::npos) continue;
    if (auto rest = renamed_stem(name.substr(dot + 1), block.stems))
      return block.to + "." + name.substr(start, dot - start) + "." + *rest;
    return std::nullopt;
  }
  return renamed_stem(name, layout.top);
}

namespace {
std::optional<std::string> original_stem(const std::string& module, const StemRenames& stems) {
  for (const auto& [from, to] : stems)
    if (module == to) return from;
  return std::nullopt;
}
}  // namespace

std::optional<OriginalName> original_name(const std::string& module, const KeyLayout& layout) {
  for (const BlockRenames& block : layout.blocks) {
    // "<to>.N.<rest>"
    if (!has_prefix(module, block.to + ".")) continue;
    const size_t start = block.to.size() + 1, dot = module.find('.', start);
    if (dot == std::string::npos) continue;
    const std::string head = block.from + "." + module.substr(start, dot - start) + ".", rest = module.substr(dot + 1);
    if (auto stem = original_stem(rest, block.stems)) return OriginalName{head + *stem};
    for (const FusedStem& fused : block.fused)
      for (size_t i = 0; i < fused.parts.size(); ++i)
        if (rest == fused.parts[i]) return OriginalName{head + fused.stem, int(i), int(fused.parts.size())};
    return std::nullopt;
  }
  if (auto stem = original_stem(module, layout.top)) return OriginalName{*stem};
  return std::nullopt;
}

StateDict renamed_keys(const StateDict& state, const KeyLayout& layout) {
  StateDict out;
  for (const auto& [name, w] : state) out[renamed_key(name, layout).value_or(name)] = w;
  return out;
}

void cut_rows(StateDict& out, const Weight& fused, const std::vector<std::string>& names,
              const std::vector<int64_t>& rows, const std::string& what) {
  int64_t total = 0;
  bool counts = true;
  for (int64_t r : rows) total += r, counts = counts && r >= 0;
  CPDIT_CHECK(counts && !fused.shape().empty() && fused.shape()[0] == total, invalid_argument, what, " has ",
              fused.shape().empty() ? 0 : fused.shape()[0], " rows, expected ", total);
  int64_t at = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    out[names[i]] = fused.narrow_rows(at, rows[i]);
    at += rows[i];
  }
}

}  // namespace cpdit::nn
