#pragma once
// A request body to a job: the native jobs API's fields (generate's long flags, request_fields.hpp, and
// output_format) and the OpenAI images API's (prompt, n, size, response_format, output_format, model,
// with the native fields beside them as OpenAI's client sends extra_body). Everything is checked here,
// before a job is queued, the way the pipeline itself would refuse it (Pipeline::check) and against the
// server's limits; a refusal is a BodyError naming the field.
#include "job_queue.hpp"

#include <cpdit/parallel/rank_layout.hpp>

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>
#include <vector>

namespace cpdit::app::serve {

// What a refused body answers: HTTP status 400 and the OpenAI error object's message and param.
struct BodyError : std::runtime_error {
  BodyError(const std::string& message, std::string param) : std::runtime_error(message), param(std::move(param)) {}
  std::string param;  // the field at fault; empty when it is the body as a whole
};

struct ServeLimits {
  int max_steps = 100;
  int64_t max_side = 2048;   // pixels, height and width each
  int64_t max_frames = 257;
  int max_images = 4;        // OpenAI's n
};

struct JobContext {
  const pipeline::Pipeline& pipe;
  parallel::RankRequest ranks;  // serve's --ring, --ulysses, --cfg-parallel: every job runs on them
  ServeLimits limits;
  std::vector<pipeline::LoraChoice> loras;  // serve's --lora: every job applies them
};

// The body as a JSON object, or a BodyError.
nlohmann::json parse_body(const std::string& body);

// POST /v1/jobs.
JobSpec native_job(const nlohmann::json& body, const JobContext& context);

// POST /v1/images/generations: one job per image (n), seeds seed, seed + 1, ... (as a batch of
// stable-diffusion.cpp's), and whether the answer carries base64 (the only response_format served).
std::vector<JobSpec> openai_jobs(const nlohmann::json& body, const JobContext& context);

// The id /v1/models lists: the preset's name or the model path's last part.
std::string model_id(const pipeline::Pipeline& pipe);

}  // namespace cpdit::app::serve
