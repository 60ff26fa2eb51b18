#include "job_body.hpp"
#include "request_fields.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/pipeline/family.hpp>

#include <filesystem>

namespace cpdit::app::serve {
namespace {

// The output formats the pipeline can make: pictures (or a clip) when it has a VAE, latents always.
void set_format(JobSpec& spec, const nlohmann::json& value, const pipeline::Pipeline& pipe) {
  if (!value.is_string()) throw BodyError("output_format must be a string, got " + value.dump(), "output_format");
  std::string format = value.get<std::string>();
  if (format == "jpg") format = "jpeg";
  const bool video = pipe.family().video();
  const bool known = format == "safetensors" || (video ? format == "mp4" : format == "png" || format == "jpeg" ||
                                                                                 format == "webp");
  if (!known)
    throw BodyError("output_format '" + format + "' is not one this model makes: " +
                        (video ? "mp4 or safetensors" : "png, jpeg, webp or safetensors"),
                    "output_format");
  if (format != "safetensors" && !pipe.has_vae())
    throw BodyError("output_format " + format + " needs the pipeline's VAE, which " + pipe.name() +
                        " lacks: ask for safetensors (the latents)",
                    "output_format");
  spec.format = format;
}

std::string default_format(const pipeline::Pipeline& pipe) {
  return !pipe.has_vae() ? "safetensors" : pipe.family().video() ? "mp4" : "png";
}

// One field through the table generate's .jsonl lines use; its Error becomes the field's BodyError.
void apply_field(const std::string& key, const nlohmann::json& value, pipeline::Request& r) {
  bool known = false;
  try {
    known = apply_request_field(key, value, "field", r);
  } catch (const Error& e) {
    throw BodyError(e.what(), key);
  }
  if (!known)
    throw BodyError("unknown field '" + key + "' (fields: " + request_field_names() + ", output_format)", key);
}

// The server's limits, then everything Pipeline::check refuses (sizes, options the family lacks, ...).
JobSpec checked(JobSpec spec, const JobContext& c) {
  pipeline::Request& r = spec.request;
  const ServeLimits& l = c.limits;
  if (r.steps > l.max_steps)
    throw BodyError("steps " + std::to_string(r.steps) + " is over this server's limit of " +
                        std::to_string(l.max_steps) + " (serve --max-steps)",
                    "steps");
  for (auto [side, name] : {std::pair{r.width, "width"}, std::pair{r.height, "height"}})
    if (side > l.max_side)
      throw BodyError(std::string(name) + " " + std::to_string(side) + " is over this server's limit of " +
                          std::to_string(l.max_side) + " pixels (serve --max-side)",
                      name);
  if (r.frames > l.max_frames)
    throw BodyError("frames " + std::to_string(r.frames) + " is over this server's limit of " +
                        std::to_string(l.max_frames) + " (serve --max-frames)",
                    "frames");
  r.parallel = c.ranks;
  r.loras = c.loras;
  r.decode = spec.format == "safetensors" ? pipeline::Decode::if_vae : pipeline::Decode::yes;
  try {
    c.pipe.check(r);
  } catch (const Error& e) {
    throw BodyError(e.what(), "");
  }
  return spec;
}

int64_t whole_number(const nlohmann::json& value, const char* field, int64_t least, int64_t most) {
  if (!value.is_number_integer() || value.get<int64_t>() < least || value.get<int64_t>() > most)
    throw BodyError(std::string(field) + " must be a whole number from " + std::to_string(least) + " to " +
                        std::to_string(most) + ", got " + value.dump(),
                    field);
  return value.get<int64_t>();
}

// OpenAI's size, "WIDTHxHEIGHT" ("auto": the model's default), as the jobs API's width and height.
void set_size(nlohmann::json& fields, const nlohmann::json& value) {
  const std::string size = value.is_string() ? value.get<std::string>() : value.dump();
  if (size == "auto") return;
  long long width = 0, height = 0;
  char end = 0;
  if (std::sscanf(size.c_str(), "%lldx%lld%c", &width, &height, &end) != 2 || width < 1 || height < 1)
    throw BodyError("size must be \"WIDTHxHEIGHT\" (e.g. \"1024x1024\") or \"auto\", got " + value.dump(), "size");
  fields["width"] = width;
  fields["height"] = height;
}

}  // namespace

nlohmann::json parse_body(const std::string& body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded()) throw BodyError("the body is not JSON", "");
  if (!j.is_object()) throw BodyError("the body must be a JSON object, got " + j.dump().substr(0, 80), "");
  return j;
}

std::string model_id(const pipeline::Pipeline& pipe) {
  if (!pipe.source().preset.empty()) return pipe.source().preset;
  const std::string path = pipe.source().model.empty() ? pipe.source().transformer : pipe.source().model;
  std::filesystem::path p(path);
  return (p.has_filename() ? p : p.parent_path()).filename().string();
}

JobSpec native_job(const nlohmann::json& body, const JobContext& context) {
  JobSpec spec;
  spec.fields = body;
  spec.format = default_format(context.pipe);
  for (const auto& [key, value] : body.items())
    if (key == "output_format") set_format(spec, value, context.pipe);
    else apply_field(key, value, spec.request);
  return checked(std::move(spec), context);
}

std::vector<JobSpec> openai_jobs(const nlohmann::json& body, const JobContext& context) {
  if (context.pipe.family().video())
    throw BodyError(context.pipe.name() + " makes video: ask for it through POST /v1/jobs", "");
  if (!body.contains("prompt") || !body["prompt"].is_string())
    throw BodyError("prompt is required, a string", "prompt");
  // OpenAI's fields to the jobs API's; the jobs API's own pass as they are.
  nlohmann::json fields = nlohmann::json::object();
  int64_t images = 1;
  for (const auto& [key, value] : body.items()) {
    if (key == "n") images = whole_number(value, "n", 1, context.limits.max_images);
    else if (key == "size") set_size(fields, value);
    else if (key == "response_format") {
      if (value != "b64_json")
        throw BodyError("response_format must be \"b64_json\": this server keeps no files to link to, got " +
                            value.dump(),
                        "response_format");
    } else if (key == "model") {
      if (value != model_id(context.pipe))
        throw BodyError("model " + value.dump() + " is not served here; this server runs \"" +
                            model_id(context.pipe) + "\" (GET /v1/models)",
                        "model");
    } else if (key == "user") {
      // OpenAI's end-user tag: accepted, not used.
    } else if (key == "width" || key == "height") {
      throw BodyError("give the size as size \"WIDTHxHEIGHT\" here (width and height are the jobs API's)", key);
    } else {
      fields[key] = value;
    }
  }
  std::vector<JobSpec> jobs{native_job(fields, context)};
  for (int64_t i = 1; i < images; ++i) {
    fields["seed"] = jobs.front().request.seed + uint64_t(i);
    jobs.push_back(native_job(fields, context));
  }
  return jobs;
}

}  // namespace cpdit::app::serve
