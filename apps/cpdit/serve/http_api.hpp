#pragma once
// The server's HTTP endpoints (cpdit serve) on a cpp-httplib server: the OpenAI images API
// (POST /v1/images/generations, GET /v1/models), the native jobs API (POST /v1/jobs, GET /v1/jobs/{id},
// its /result and /events, DELETE /v1/jobs/{id}), GET /health, /metrics (Prometheus text) and
// /openapi.json (docs/openapi.json, which describes every one of them). Every error is OpenAI's error
// object, {"error": {"message", "type", "param", "code"}}.
#include "job_body.hpp"

#include <httplib.h>

#include <atomic>
#include <string>

namespace cpdit::app::serve {

struct ApiOptions {
  std::string api_key;  // non-empty: every endpoint but /health wants "Authorization: Bearer KEY"
  size_t max_body_bytes = 1 << 20;
  int io_timeout_seconds = 30;  // a client that stalls a read or a write longer is dropped
};

// Installs the routes and the server's limits; `healthy` turns /health to 503 while the queue stops.
void add_routes(httplib::Server& server, JobQueue& queue, const JobContext& context, const ApiOptions& options,
                const std::atomic<bool>& healthy);

}  // namespace cpdit::app::serve
