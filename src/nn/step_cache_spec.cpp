// The step cache specs of --cache, and MagCache's ratios resampled to a run's step count.
#include <cpdit/core/error.hpp>
#include <cpdit/nn/step_cache.hpp>

#include <cmath>
#include <cstdlib>
#include <sstream>

namespace cpdit::nn {

namespace {

const char* const kSpecForms = "fbcache[:THRESHOLD], magcache[:THRESHOLD][,max_skip_steps=N][,retention_ratio=R]"
                               "[,ratios=a/b/c][,calibrate] or taylorseer[:interval=5][,before=3][,after=N]"
                               "[,order=1][,factors=bf16|f32][,module=REGEX...]";

std::vector<std::string> split_on(const std::string& s, char separator) {
  if (s.empty()) return {""};
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, separator)) parts.push_back(part);
  if (!s.empty() && s.back() == separator) parts.push_back("");
  return parts;
}

// A finite number >= 0 spelled wholly by `text`, else a one-line refusal naming `what`.
double non_negative(const std::string& spec, const std::string& what, const std::string& text) {
  char* end = nullptr;
  const double v = text.empty() ? std::nan("") : std::strtod(text.c_str(), &end);
  CPDIT_CHECK(!text.empty() && end == text.c_str() + text.size() && std::isfinite(v) && v >= 0, invalid_argument,
              "step cache '", spec, "': ", what, " must be a number >= 0, got '", text, "'");
  return v;
}

// A whole number >= `least` spelled wholly by `text`.
int whole(const std::string& spec, const std::string& what, const std::string& text, int least) {
  const double n = non_negative(spec, what, text);
  CPDIT_CHECK(n == std::floor(n) && n >= least && n <= 1e6, invalid_argument, "step cache '", spec, "': ", what,
              " must be a whole number >= ", least, ", got '", text, "'");
  return int(n);
}

}  // namespace

const std::vector<std::string>& taylor_seer_default_modules() {
  // diffusers' _TRANSFORMER_BLOCK_IDENTIFIERS (its spatial and temporal attention patterns).
  static const std::vector<std::string> patterns{"^blocks.*attn", "^transformer_blocks.*attn",
                                                 "^single_transformer_blocks.*attn",
                                                 "^temporal_transformer_blocks.*attn"};
  return patterns;
}

StepCacheConfig parse_step_cache(const std::string& spec) {
  const size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  StepCacheConfig c;
  if (kind == "fbcache") {
    c.kind = StepCacheConfig::Kind::first_block;
    c.threshold = 0.05;  // FirstBlockCacheConfig's default
  } else if (kind == "magcache") {
    c.kind = StepCacheConfig::Kind::mag;
    c.threshold = 0.06;  // MagCacheConfig's default
  } else if (kind == "taylorseer") {
    c.kind = StepCacheConfig::Kind::taylor_seer;
  } else if (kind == "none" && colon == std::string::npos) {
    return c;
  } else {
    fail(ErrorKind::invalid_argument, "step cache '", spec, "': unknown kind '", kind, "' (", kSpecForms, ", or none)");
  }
  if (colon == std::string::npos) return c;
  const std::vector<std::string> items = split_on(spec.substr(colon + 1), ',');
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string& item = items[i];
    const size_t eq = item.find('=');
    // A bare first number is the threshold.
    const bool mag = c.kind == StepCacheConfig::Kind::mag;
    const bool taylor = c.kind == StepCacheConfig::Kind::taylor_seer;
    const std::string key = eq != std::string::npos                  ? item.substr(0, eq)
                            : i == 0 && item != "calibrate" && !taylor ? "threshold"
                                                                       : item;
    const std::string value = eq == std::string::npos ? item : item.substr(eq + 1);
    if (taylor && eq != std::string::npos) {
      if (key == "interval") {
        c.cache_interval = whole(spec, key, value, 1);
        continue;
      } else if (key == "before") {
        c.disable_cache_before_step = whole(spec, key, value, 0);
        continue;
      } else if (key == "after") {
        c.disable_cache_after_step = whole(spec, key, value, 0);
        continue;
      } else if (key == "order") {
        c.max_order = whole(spec, key, value, 0);
        CPDIT_CHECK(c.max_order <= 8, invalid_argument, "step cache '", spec, "': order is at most 8, got ", value);
        continue;
      } else if (key == "factors") {
        CPDIT_CHECK(value == "bf16" || value == "f32", invalid_argument, "step cache '", spec,
                    "': factors are kept in bf16 or f32, got '", value, "'");
        c.f32_factors = value == "f32";
        continue;
      } else if (key == "module") {
        CPDIT_CHECK(!value.empty(), invalid_argument, "step cache '", spec, "': module= needs a regex");
        c.modules.push_back(value);
        continue;
      }
    }
    if (!taylor && key == "threshold") {
      c.threshold = non_negative(spec, "the threshold", value);
    } else if (mag && key == "calibrate" && eq == std::string::npos) {
      c.calibrate = true;
    } else if (mag && key == "max_skip_steps") {
      c.max_skip_steps = whole(spec, key, value, 0);
    } else if (mag && key == "retention_ratio") {
      c.retention_ratio = non_negative(spec, key, value);
      CPDIT_CHECK(c.retention_ratio <= 1, invalid_argument, "step cache '", spec,
                  "': retention_ratio is a share of the steps, at most 1, got '", value, "'");
    } else if (mag && key == "ratios") {
      for (const std::string& r : split_on(value, '/')) c.mag_ratios.push_back(float(non_negative(spec, "a ratio", r)));
    } else {
      fail(ErrorKind::invalid_argument, "step cache '", spec, "': '", item, "' is not a setting of ", kind, " (",
           kSpecForms, ")");
    }
  }
  return c;
}

std::string step_cache_name(const StepCacheConfig& c) {
  std::ostringstream s;
  switch (c.kind) {
    case StepCacheConfig::Kind::none: return "none";
    case StepCacheConfig::Kind::first_block: s << "fbcache:" << c.threshold; break;
    case StepCacheConfig::Kind::mag:
      if (c.calibrate) return "magcache:calibrate";
      s << "magcache:" << c.threshold;
      break;
    case StepCacheConfig::Kind::taylor_seer:
      s << "taylorseer:interval=" << c.cache_interval << ",before=" << c.disable_cache_before_step;
      if (c.disable_cache_after_step >= 0) s << ",after=" << c.disable_cache_after_step;
      s << ",order=" << c.max_order << (c.f32_factors ? ",factors=f32" : "");
      for (const std::string& m : c.modules) s << ",module=" << m;
      break;
  }
  return s.str();
}

std::vector<float> nearest_interp(const std::vector<float>& ratios, int steps) {
  CPDIT_CHECK(!ratios.empty() && steps >= 1, invalid_argument, "MagCache ratios: ", ratios.size(),
              " ratios cannot be resampled to ", steps, " steps");
  if (int(ratios.size()) == steps) return ratios;  // diffusers resamples only another length
  if (steps == 1) return {ratios.back()};
  // diffusers: arange(steps) in f32 times the Python float (n-1)/(steps-1), the product in f32, then
  // torch.round (half to even, as nearbyint in the default rounding mode).
  const float scale = float(double(ratios.size() - 1) / double(steps - 1));
  std::vector<float> out(static_cast<size_t>(steps));
  for (int i = 0; i < steps; ++i) out[size_t(i)] = ratios[size_t(std::nearbyint(float(i) * scale))];
  return out;
}

}  // namespace cpdit::nn
