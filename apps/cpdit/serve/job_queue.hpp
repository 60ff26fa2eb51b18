#pragma once
// The server's jobs: requests wait in a bounded FIFO and one worker thread runs them, one at a time, on
// the resident Pipeline with all of its ranks (the whole mesh serves one generation, as context
// parallelism intends). Each job's state, progress and result stay to be polled; the oldest finished
// jobs are forgotten beyond `kept`, so memory does not grow with the requests served. Results are
// written by write_outputs into a private spool folder and read back into memory (never a path a
// request names), so they are the bytes generate writes for the same settings.
#include "generate_batch.hpp"

#include <cpdit/pipeline/pipeline.hpp>

#include <nlohmann/json.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace cpdit::app::serve {

enum class JobState { queued, running, done, failed, cancelled };
const char* job_state_name(JobState state);

// What a job asks: the pipeline's request and the format of its result ("png", "jpeg", "webp", "mp4",
// or "safetensors" for the latents), made from `fields` (the jobs API's, job_body.hpp), which are what
// the other MPI processes are sent to make the same request.
struct JobSpec {
  nlohmann::json fields;
  pipeline::Request request;
  std::string format;
};

struct JobStatus {
  std::string id;
  JobState state = JobState::queued;
  int64_t queue_position = 0;      // queued: jobs ahead of it, the running one included
  std::string stage;               // running: "encode", "denoise" or "decode" (Pipeline::run's stages)
  double denoise_started = 0;      // Unix seconds the denoising loop began; 0 not yet
  int step = 0, steps = 0;         // denoising steps done and in all, once it runs
  double eta_seconds = -1;         // running: steps left at the mean step time so far; -1 before a step
  double created = 0, started = 0, finished = 0;  // Unix seconds; 0 not yet
  std::string error;               // failed: the run's one-line error
  uint64_t seed = 0;
};

struct JobResult {
  std::string content_type;
  std::string bytes;
};

// Counts and sums for /metrics.
struct QueueMetrics {
  int64_t queued = 0, running = 0, done = 0, failed = 0, cancelled = 0;  // by state, since start
  int64_t steps = 0;
  double step_seconds = 0;
};

class ProcessJobs;

class JobQueue {
 public:
  // `processes`: under mpirun, the other processes to send each job to (and heartbeats between jobs);
  // null on local ranks.
  JobQueue(const pipeline::Pipeline& pipe, std::string spool, size_t max_queue, size_t kept,
           ProcessJobs* processes = nullptr);
  ~JobQueue();
  JobQueue(const JobQueue&) = delete;
  JobQueue& operator=(const JobQueue&) = delete;

  // The new job's id; nullopt when `max_queue` jobs wait already (or the queue is shutting down).
  std::optional<std::string> submit(JobSpec spec);
  std::optional<JobStatus> status(const std::string& id) const;
  // A queued job is cancelled at once, a running one after its current step (on every rank).
  std::optional<JobStatus> cancel(const std::string& id);
  // A done job's result; null otherwise.
  std::shared_ptr<const JobResult> result(const std::string& id) const;
  // Waits until the job has ended (done, failed or cancelled): its status and, done, its result.
  std::pair<JobStatus, std::shared_ptr<const JobResult>> wait(const std::string& id) const;
  QueueMetrics metrics() const;
  // The mean seconds a finished job took (0 before one), for a full queue's Retry-After.
  double mean_job_seconds() const;
  // Non-empty once the MPI processes have failed (a heartbeat or a job's communication): the error. The
  // queue takes no more jobs then, and the server should end.
  std::string broken() const;
  // Takes no more jobs: the queued ones end cancelled, the running one has `drain_seconds` to finish
  // before it is cancelled; returns when the worker has stopped.
  void shutdown(double drain_seconds);

 private:
  struct Job;
  void work();
  void run(Job& job);
  void finish(Job& job, JobState state);  // under mutex_
  JobStatus snapshot(const Job& job) const;

  void break_mesh(const std::string& error);  // under mutex_

  const pipeline::Pipeline& pipe_;
  std::string spool_;
  size_t max_queue_, kept_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::deque<std::shared_ptr<Job>> waiting_;
  std::map<std::string, std::shared_ptr<Job>> jobs_;
  std::deque<std::string> finished_;  // oldest first, forgotten beyond kept_
  std::shared_ptr<Job> running_;
  QueueMetrics metrics_;
  double job_seconds_ = 0;
  int64_t next_id_ = 1;
  bool stopping_ = false;
  std::string broken_;
  ProcessJobs* processes_;
  std::thread worker_;
};

}  // namespace cpdit::app::serve
