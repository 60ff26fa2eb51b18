#pragma once
// cpdit serve under mpirun: every process serves. Rank 0 listens and queues (job_queue.hpp); before each
// job it sends the job's fields to the other processes, which make the same request from them
// (native_job, the same checks) and run it beside rank 0, each its share of the one generation. Between
// jobs rank 0 sends a heartbeat well inside the communicator's timeout (CPDIT_COMM_TIMEOUT_S), so an
// idle server does not time its followers out and a dead process is found while idle too; at shutdown
// it sends stop, and the followers return.
#include "job_body.hpp"

#include <cpdit/comm/communicator.hpp>

#include <chrono>
#include <memory>

namespace cpdit::app::serve {

class ProcessJobs {
 public:
  explicit ProcessJobs(std::shared_ptr<comm::Communicator> world) : world_(std::move(world)) {}

  // Rank 0's messages. Each throws Error (comm, timeout) when a process has failed.
  void job(const nlohmann::json& fields);
  void heartbeat();
  void stop();
  // A quarter of the communicator's timeout, at most 5 s.
  std::chrono::milliseconds heartbeat_interval() const;

  // The other ranks: runs what rank 0 sends until it sends stop.
  void follow(const JobContext& context);

 private:
  void send(const nlohmann::json& message);
  std::shared_ptr<comm::Communicator> world_;
};

}  // namespace cpdit::app::serve
