#include "job_queue.hpp"
#include "process_jobs.hpp"
#include "write_outputs.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>

#include <chrono>
#include <malloc.h>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace cpdit::app::serve {

namespace fs = std::filesystem;

struct JobQueue::Job {
  JobSpec spec;
  JobStatus status;
  std::atomic<bool> cancel{false};
  double step_seconds = 0;
  std::shared_ptr<const JobResult> result;
};

namespace {

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

bool ended(JobState s) { return s == JobState::done || s == JobState::failed || s == JobState::cancelled; }

const char* content_type(const std::string& format) {
  if (format == "png") return "image/png";
  if (format == "jpeg") return "image/jpeg";
  if (format == "webp") return "image/webp";
  if (format == "mp4") return "video/mp4";
  return "application/octet-stream";  // safetensors
}

// An id no one guesses from another's (a job's result is its id's only key besides the API key).
std::string new_job_id(int64_t serial) {
  static thread_local std::mt19937_64 random{std::random_device{}()};
  char id[48];
  std::snprintf(id, sizeof id, "job-%lld-%016llx", (long long)serial, (unsigned long long)random());
  return id;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  CPDIT_CHECK(in.good() || in.eof(), io, "cannot read the spooled result ", path.string());
  return std::move(bytes).str();
}

}  // namespace

const char* job_state_name(JobState state) {
  switch (state) {
    case JobState::queued: return "queued";
    case JobState::running: return "running";
    case JobState::done: return "done";
    case JobState::failed: return "failed";
    case JobState::cancelled: return "cancelled";
  }
  return "?";
}

JobQueue::JobQueue(const pipeline::Pipeline& pipe, std::string spool, size_t max_queue, size_t kept,
                   ProcessJobs* processes)
    : pipe_(pipe),
      spool_(std::move(spool)),
      max_queue_(max_queue),
      kept_(kept),
      processes_(processes),
      worker_([this] { work(); }) {}

JobQueue::~JobQueue() { shutdown(0); }

std::optional<std::string> JobQueue::submit(JobSpec spec) {
  std::lock_guard lock(mutex_);
  if (stopping_ || waiting_.size() >= max_queue_) return std::nullopt;
  auto job = std::make_shared<Job>();
  job->status.id = new_job_id(next_id_++);
  job->status.created = unix_seconds();
  job->status.seed = spec.request.seed;
  job->spec = std::move(spec);
  jobs_[job->status.id] = job;
  waiting_.push_back(job);
  ++metrics_.queued;
  changed_.notify_all();
  return job->status.id;
}

JobStatus JobQueue::snapshot(const Job& job) const {
  JobStatus s = job.status;
  if (s.state == JobState::queued) {
    s.queue_position = running_ ? 1 : 0;
    for (const auto& waiting : waiting_) {
      if (waiting.get() == &job) break;
      ++s.queue_position;
    }
  }
  if (s.state == JobState::running && s.step > 0) s.eta_seconds = job.step_seconds / s.step * (s.steps - s.step);
  return s;
}

std::optional<JobStatus> JobQueue::status(const std::string& id) const {
  std::lock_guard lock(mutex_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  return snapshot(*it->second);
}

std::optional<JobStatus> JobQueue::cancel(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  const std::shared_ptr<Job> held = it->second;  // finish() may forget it
  Job& job = *held;
  if (job.status.state == JobState::queued) {
    std::erase(waiting_, held);
    finish(job, JobState::cancelled);
  } else if (job.status.state == JobState::running) {
    job.cancel = true;
  }
  return snapshot(job);
}

std::shared_ptr<const JobResult> JobQueue::result(const std::string& id) const {
  std::lock_guard lock(mutex_);
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : it->second->result;
}

std::pair<JobStatus, std::shared_ptr<const JobResult>> JobQueue::wait(const std::string& id) const {
  std::unique_lock lock(mutex_);
  auto it = jobs_.find(id);
  CPDIT_CHECK(it != jobs_.end(), invalid_argument, "job ", id, " ended and was forgotten before it was read "
              "(serve --kept-jobs)");
  const std::shared_ptr<Job> job = it->second;  // kept alive even if forgotten meanwhile
  changed_.wait(lock, [&] { return ended(job->status.state); });
  return {snapshot(*job), job->result};
}

QueueMetrics JobQueue::metrics() const {
  std::lock_guard lock(mutex_);
  QueueMetrics m = metrics_;
  m.queued = int64_t(waiting_.size());
  m.running = running_ ? 1 : 0;
  return m;
}

double JobQueue::mean_job_seconds() const {
  std::lock_guard lock(mutex_);
  const int64_t finished = metrics_.done + metrics_.failed;
  return finished ? job_seconds_ / double(finished) : 0.0;
}

void JobQueue::finish(Job& job, JobState state) {
  job.status.state = state;
  job.status.finished = unix_seconds();
  if (state == JobState::done) ++metrics_.done;
  if (state == JobState::failed) ++metrics_.failed;
  if (state == JobState::cancelled) ++metrics_.cancelled;
  finished_.push_back(job.status.id);
  while (finished_.size() > kept_) {
    jobs_.erase(finished_.front());
    finished_.pop_front();
  }
  changed_.notify_all();
}

void JobQueue::shutdown(double drain_seconds) {
  std::unique_lock lock(mutex_);
  if (!worker_.joinable()) return;
  stopping_ = true;
  while (!waiting_.empty()) {
    std::shared_ptr<Job> job = waiting_.front();
    waiting_.pop_front();
    finish(*job, JobState::cancelled);
  }
  changed_.notify_all();
  if (running_) {
    const std::shared_ptr<Job> job = running_;
    changed_.wait_for(lock, std::chrono::duration<double>(drain_seconds), [&] { return ended(job->status.state); });
    job->cancel = true;
  }
  lock.unlock();
  worker_.join();
}

std::string JobQueue::broken() const {
  std::lock_guard lock(mutex_);
  return broken_;
}

void JobQueue::break_mesh(const std::string& error) {
  broken_ = "the MPI processes failed: " + error;
  stopping_ = true;
  while (!waiting_.empty()) {
    std::shared_ptr<Job> job = waiting_.front();
    waiting_.pop_front();
    job->status.error = broken_;
    finish(*job, JobState::failed);
  }
}

void JobQueue::work() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock lock(mutex_);
      const auto ready = [&] { return stopping_ || !waiting_.empty(); };
      if (!processes_) changed_.wait(lock, ready);
      else if (!changed_.wait_for(lock, processes_->heartbeat_interval(), ready)) {
        lock.unlock();
        try {
          processes_->heartbeat();
        } catch (const std::exception& e) {
          lock.lock();
          break_mesh(e.what());
          changed_.notify_all();
          return;
        }
        continue;
      }
      if (waiting_.empty()) break;  // stopping, nothing left
      job = waiting_.front();
      waiting_.pop_front();
      running_ = job;
      job->status.state = JobState::running;
      job->status.started = unix_seconds();
      changed_.notify_all();
    }
    run(*job);
    std::lock_guard lock(mutex_);
    running_.reset();
    if (!broken_.empty()) return;
  }
  if (processes_) try {
      processes_->stop();
    } catch (const std::exception&) {
      // A process that failed now has nothing left to stop.
    }
}

void JobQueue::run(Job& job) {
  pipeline::Request request = job.spec.request;
  request.cancel = &job.cancel;
  request.on_step = [this, &job](int step, int total, double seconds) {
    std::lock_guard lock(mutex_);
    job.status.step = step + 1;
    job.status.steps = total;
    job.step_seconds += seconds;
    metrics_.steps += 1;
    metrics_.step_seconds += seconds;
    changed_.notify_all();
  };
  JobState state = JobState::done;
  std::string error;
  std::shared_ptr<JobResult> result;
  const fs::path file = fs::path(spool_) / (job.status.id + "." + job.spec.format);
  bool mesh_failed = false;
  try {
    if (processes_) processes_->job(job.spec.fields);
    pipeline::StageLog stages;
    stages.on_begin = [this, &job](const std::string& stage) {
      std::lock_guard lock(mutex_);
      job.status.stage = stage;
      if (stage == "denoise") job.status.denoise_started = unix_seconds();
      changed_.notify_all();
    };
    const pipeline::Result ran = pipe_.run(std::move(request), stages);
    Outputs outputs;
    (job.spec.format == "safetensors" ? outputs.out : job.spec.format == "mp4" ? outputs.video : outputs.image) =
        file.string();
    write_outputs(ran, outputs);
    result = std::make_shared<JobResult>(JobResult{content_type(job.spec.format), read_bytes(file)});
  } catch (const Error& e) {
    state = e.kind() == ErrorKind::interrupted ? JobState::cancelled : JobState::failed;
    error = e.what();
    mesh_failed = processes_ && (e.kind() == ErrorKind::comm || e.kind() == ErrorKind::timeout);
  } catch (const std::exception& e) {
    state = JobState::failed;
    error = e.what();
  }
  std::error_code ignored;
  fs::remove(file, ignored);
  // A job's activations go back to the system, not only to the allocator: a resident server's memory
  // is then its weights and the results it keeps, whatever size its last request was.
  malloc_trim(0);
  std::lock_guard lock(mutex_);
  job.result = std::move(result);
  job.status.error = error;
  if (state != JobState::cancelled) job_seconds_ += unix_seconds() - job.status.started;
  finish(job, state);
  if (mesh_failed) break_mesh(error);
}

}  // namespace cpdit::app::serve
