#include "http_api.hpp"


#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <regex>
#include <thread>

namespace cpdit::app::serve {

extern const char* const kOpenApiDocument;  // docs/openapi.json, embedded at build time

namespace {

using httplib::Request;
using httplib::Response;

void send_json(Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void send_error(Response& res, int status, const std::string& message, const std::string& param = "",
                const char* type = "invalid_request_error") {
  send_json(res, status,
            {{"error",
              {{"message", message},
               {"type", type},
               {"param", param.empty() ? nlohmann::json() : nlohmann::json(param)},
               {"code", status}}}});
}

nlohmann::json status_json(const JobStatus& s) {
  nlohmann::json j = {{"id", s.id},          {"object", "job"},        {"status", job_state_name(s.state)},
                      {"step", s.step},      {"steps", s.steps},       {"seed", s.seed},
                      {"created", s.created}};
  if (s.state == JobState::queued) j["queue_position"] = s.queue_position;
  if (s.started > 0) j["started"] = s.started;
  if (!s.stage.empty() && s.state == JobState::running) j["stage"] = s.stage;
  if (s.denoise_started > 0) j["denoise_started"] = s.denoise_started;
  if (s.finished > 0) j["finished"] = s.finished;
  if (s.eta_seconds >= 0) j["eta_seconds"] = s.eta_seconds;
  if (!s.error.empty()) j["error"] = s.error;
  return j;
}

std::string base64(const std::string& bytes) {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t n = uint32_t(uint8_t(bytes[i])) << 16;
    if (i + 1 < bytes.size()) n |= uint32_t(uint8_t(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) n |= uint8_t(bytes[i + 2]);
    out += alphabet[(n >> 18) & 63];
    out += alphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? alphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? alphabet[n & 63] : '=';
  }
  return out;
}

// A full queue's answer: 429, and when to try again (the mean job's time, at least a second).
void send_queue_full(Response& res, const JobQueue& queue) {
  res.set_header("Retry-After", std::to_string(std::max(1, int(std::ceil(queue.mean_job_seconds())))));
  send_error(res, 429, "the queue is full (serve --max-queue): try again later", "", "rate_limit_error");
}

int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * int64_t(sysconf(_SC_PAGESIZE));
}

std::string metrics_text(const JobQueue& queue) {
  const QueueMetrics m = queue.metrics();
  std::string out;
  char line[160];
  auto add = [&](const char* name, const char* type, const char* help) {
    std::snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    out += line;
  };
  add("cpdit_queue_length", "gauge", "Jobs waiting to run.");
  out += "cpdit_queue_length " + std::to_string(m.queued) + "\n";
  add("cpdit_jobs_running", "gauge", "Jobs running (0 or 1).");
  out += "cpdit_jobs_running " + std::to_string(m.running) + "\n";
  add("cpdit_jobs_finished_total", "counter", "Jobs ended since start, by state.");
  for (auto [state, count] : {std::pair{"done", m.done}, {"failed", m.failed}, {"cancelled", m.cancelled}})
    out += std::string("cpdit_jobs_finished_total{state=\"") + state + "\"} " + std::to_string(count) + "\n";
  add("cpdit_step_seconds", "summary", "Denoising step times.");
  std::snprintf(line, sizeof line, "cpdit_step_seconds_sum %.6f\ncpdit_step_seconds_count %lld\n", m.step_seconds,
                (long long)m.steps);
  out += line;
  add("cpdit_resident_bytes", "gauge", "The server process's resident memory.");
  out += "cpdit_resident_bytes " + std::to_string(resident_bytes()) + "\n";
  return out;
}

// The methods each endpoint answers, for a 405 naming them: the paths as regular expressions, as the
// routes below are registered.
const std::vector<std::pair<std::regex, std::string>>& endpoint_methods() {
  static const std::vector<std::pair<std::regex, std::string>> methods = {
      {std::regex("/health|/openapi\\.json|/metrics|/v1/models"), "GET, HEAD"},
      {std::regex("/v1/images/generations|/v1/jobs"), "POST"},
      {std::regex("/v1/jobs/[A-Za-z0-9-]+"), "GET, HEAD, DELETE"},
      {std::regex("/v1/jobs/[A-Za-z0-9-]+/(result|events)"), "GET, HEAD"},
  };
  return methods;
}

// A method the endpoint does not answer: 405, naming those it does. False for an unknown path.
bool refuse_method(const Request& req, Response& res) {
  // A request httplib refused before it parsed the path (an unknown method) has its target only.
  const std::string target = req.path.empty() ? req.target.substr(0, req.target.find('?')) : req.path;
  for (const auto& [path, methods] : endpoint_methods())
    if (std::regex_match(target, path)) {
      const bool known = req.method == "HEAD" || req.method == "GET" || req.method == "POST" || req.method == "DELETE";
      if (known && methods.find(req.method) != std::string::npos) return false;
      res.set_header("Allow", methods);
      send_error(res, 405, req.method + " " + target + " is not served: " + methods);
      return true;
    }
  return false;
}

}  // namespace

void add_routes(httplib::Server& server, JobQueue& queue, const JobContext& context, const ApiOptions& options,
                const std::atomic<bool>& healthy) {
  server.set_payload_max_length(options.max_body_bytes);
  server.set_read_timeout(options.io_timeout_seconds, 0);
  server.set_write_timeout(options.io_timeout_seconds, 0);
  server.set_keep_alive_timeout(5);

  server.set_pre_routing_handler([&options](const Request& req, Response& res) {
    if (refuse_method(req, res)) return httplib::Server::HandlerResponse::Handled;
    if (options.api_key.empty() || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + options.api_key)
      return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("WWW-Authenticate", "Bearer");
    send_error(res, 401, "missing or wrong API key: send Authorization: Bearer KEY (serve --api-key)", "",
               "authentication_error");
    return httplib::Server::HandlerResponse::Handled;
  });
  // httplib's own refusals (no route, a body over the limit) and anything thrown, as JSON errors.
  server.set_error_handler([](const Request& req, Response& res) {
    if (!res.body.empty()) return;
    // A method httplib does not parse (QUERY, ...) comes here as 400 before any route.
    if (res.status == 400 && refuse_method(req, res)) return;
    if (res.status == 404) send_error(res, 404, "no endpoint " + req.method + " " + req.path + " (GET /openapi.json)");
    else if (res.status == 413) send_error(res, 413, "the body is over this server's limit (serve --max-body-bytes)");
    else send_error(res, res.status, "the request was refused (HTTP " + std::to_string(res.status) + ")");
  });
  server.set_exception_handler([](const Request&, Response& res, std::exception_ptr error) {
    std::string message = "internal error";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      message = e.what();
    } catch (...) {
    }
    send_error(res, 500, message, "", "server_error");
  });

  server.Get("/health", [&](const Request&, Response& res) {
    send_json(res, healthy ? 200 : 503, {{"status", healthy ? "ok" : "stopping"}, {"model", model_id(context.pipe)}});
  });
  server.Get("/openapi.json", [](const Request&, Response& res) { res.set_content(kOpenApiDocument, "application/json"); });
  server.Get("/metrics", [&](const Request&, Response& res) {
    res.set_content(metrics_text(queue), "text/plain; version=0.0.4");
  });
  server.Get("/v1/models", [&](const Request&, Response& res) {
    send_json(res, 200,
              {{"object", "list"},
               {"data", {{{"id", model_id(context.pipe)}, {"object", "model"}, {"created", 0}, {"owned_by", "cpdit"}}}}});
  });

  server.Post("/v1/jobs", [&](const Request& req, Response& res) {
    if (!healthy) return send_error(res, 503, "the server is stopping", "", "server_error");
    try {
      const std::optional<std::string> id = queue.submit(native_job(parse_body(req.body), context));
      if (!id) return send_queue_full(res, queue);
      send_json(res, 202, status_json(*queue.status(*id)));
    } catch (const BodyError& e) {
      send_error(res, 400, e.what(), e.param);
    }
  });
  const std::string job = R"(/v1/jobs/([A-Za-z0-9-]+))";
  server.Get(job, [&](const Request& req, Response& res) {
    if (auto s = queue.status(req.matches[1])) return send_json(res, 200, status_json(*s));
    send_error(res, 404, "no job " + std::string(req.matches[1]), "id");
  });
  server.Delete(job, [&](const Request& req, Response& res) {
    if (auto s = queue.cancel(req.matches[1])) return send_json(res, 200, status_json(*s));
    send_error(res, 404, "no job " + std::string(req.matches[1]), "id");
  });
  server.Get(job + "/result", [&](const Request& req, Response& res) {
    const std::string id = req.matches[1];
    const std::optional<JobStatus> s = queue.status(id);
    if (!s) return send_error(res, 404, "no job " + id, "id");
    if (const auto result = queue.result(id)) return res.set_content(result->bytes, result->content_type.c_str());
    send_error(res, 409, "job " + id + " is " + job_state_name(s->state) + (s->error.empty() ? "" : ": " + s->error) +
                             ", it has no result", "id");
  });
  // Server-sent events: the job's status at every change, until it ends or the client leaves.
  server.Get(job + "/events", [&](const Request& req, Response& res) {
    const std::string id = req.matches[1];
    if (!queue.status(id)) return send_error(res, 404, "no job " + id, "id");
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider("text/event-stream", [&queue, id](size_t, httplib::DataSink& sink) {
      std::string last;
      for (;;) {
        const std::optional<JobStatus> s = queue.status(id);
        if (!s) break;  // forgotten
        const std::string now = status_json(*s).dump();
        if (now != last) {
          const std::string event = "event: status\ndata: " + now + "\n\n";
          if (!sink.write(event.data(), event.size())) return false;  // the client left
          last = now;
        }
        if (s->state != JobState::queued && s->state != JobState::running) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (!sink.is_writable()) return false;
      }
      sink.done();
      return true;
    });
  });

  server.Post("/v1/images/generations", [&](const Request& req, Response& res) {
    if (!healthy) return send_error(res, 503, "the server is stopping", "", "server_error");
    std::vector<std::string> ids;
    try {
      for (JobSpec& spec : openai_jobs(parse_body(req.body), context)) {
        std::optional<std::string> id = queue.submit(std::move(spec));
        if (!id) {
          for (const std::string& queued : ids) queue.cancel(queued);
          return send_queue_full(res, queue);
        }
        ids.push_back(*id);
      }
    } catch (const BodyError& e) {
      return send_error(res, 400, e.what(), e.param);
    }
    nlohmann::json data = nlohmann::json::array();
    for (const std::string& id : ids) {
      const auto [s, result] = queue.wait(id);
      if (!result) {
        for (const std::string& other : ids) queue.cancel(other);
        return send_error(res, s.state == JobState::cancelled ? 503 : 500,
                          "job " + id + " " + job_state_name(s.state) + (s.error.empty() ? "" : ": " + s.error), "",
                          "server_error");
      }
      data.push_back({{"b64_json", base64(result->bytes)}, {"seed", s.seed}});
    }
    const auto created = std::chrono::duration_cast<std::chrono::seconds>(
        std::chrono::system_clock::now().time_since_epoch()).count();
    send_json(res, 200, {{"created", created}, {"data", data}});
  });
}

}  // namespace cpdit::app::serve
