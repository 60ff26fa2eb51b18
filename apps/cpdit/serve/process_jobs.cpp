#include "process_jobs.hpp"

#include <cpdit/comm/tensor_ops.hpp>
#include <cpdit/core/error.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>

namespace cpdit::app::serve {

void ProcessJobs::send(const nlohmann::json& message) {
  std::string bytes = message.dump();
  comm::broadcast_bytes(*world_, bytes, 0);
}

void ProcessJobs::job(const nlohmann::json& fields) { send({{"kind", "job"}, {"fields", fields}}); }
void ProcessJobs::heartbeat() { send({{"kind", "heartbeat"}}); }
void ProcessJobs::stop() { send({{"kind", "stop"}}); }

std::chrono::milliseconds ProcessJobs::heartbeat_interval() const {
  return std::clamp(world_->timeout() / 4, std::chrono::milliseconds(1), std::chrono::milliseconds(5000));
}

void ProcessJobs::follow(const JobContext& context) {
  for (;;) {
    std::string bytes;
    comm::broadcast_bytes(*world_, bytes, 0);
    const nlohmann::json message = nlohmann::json::parse(bytes);
    const std::string kind = message.at("kind");
    if (kind == "stop") return;
    if (kind != "job") continue;
    JobSpec spec = native_job(message.at("fields"), context);
    // Rank 0's cancel reaches this rank through the ranks' agreement after every step.
    const std::atomic<bool> never{false};
    spec.request.cancel = &never;
    pipeline::StageLog stages;
    try {
      context.pipe.run(std::move(spec.request), stages);
    } catch (const Error& e) {
      // A cancelled job ends on every rank at once; a failing one fails on rank 0 too, which reports
      // it. Either way the next message is rank 0's next. A broken mesh is not: that ends the server.
      if (e.kind() == ErrorKind::comm || e.kind() == ErrorKind::timeout) throw;
    }
  }
}

}  // namespace cpdit::app::serve
