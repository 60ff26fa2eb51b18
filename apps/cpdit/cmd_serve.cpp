// cpdit serve: one resident pipeline behind an HTTP API (serve/http_api.hpp) on this machine's local
// ranks or, under mpirun, on the MPI processes (serve/process_jobs.hpp). The model opens once; then every request — OpenAI's images API or the native jobs API — runs
// on it in turn (serve/job_queue.hpp), with the ranks, LoRA adapters and components the flags give.
// Binds 127.0.0.1 unless --host says otherwise. SIGINT and SIGTERM stop it: no new connections, the
// queued jobs cancelled, the running one given --drain-seconds, then exit 0.
#include "command.hpp"
#include "component_flags.hpp"
#include "lora_flags.hpp"
#include "option_checks.hpp"
#include "parallel_flags.hpp"
#include "serve/http_api.hpp"
#include "serve/process_jobs.hpp"
#include "weight_flags.hpp"

#include <cpdit/comm/launch.hpp>
#include <cpdit/comm/mpi.hpp>
#include <cpdit/core/error.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <chrono>
#include <thread>

namespace cpdit::app {
namespace {

namespace fs = std::filesystem;

struct ServeFlags {
  pipeline::PipelineSource source;
  ComponentFlags components;
  LoraFlags loras;
  parallel::RankRequest ranks;
  serve::ServeLimits limits;
  serve::ApiOptions api;
  std::string host = "127.0.0.1", api_key_file;
  int port = 8080;
  size_t max_queue = 16, kept_jobs = 64;
  double drain_seconds = 0;
};

// A private folder for the results on their way to memory: made for this process alone, removed at exit.
struct Spool {
  std::string path;
  Spool() {
    std::string pattern = (fs::temp_directory_path() / "cpdit-serve-XXXXXX").string();
    CPDIT_CHECK(mkdtemp(pattern.data()) != nullptr, io, "cannot make the spool folder ", pattern);
    path = pattern;
  }
  ~Spool() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

volatile std::sig_atomic_t stop_signal = 0;
void note_stop_signal(int signal) { stop_signal = signal; }

std::string read_key_file(const std::string& path) {
  std::ifstream in(path);
  CPDIT_CHECK(in, invalid_argument, "--api-key-file ", path, ": cannot read it");
  std::string key;
  std::getline(in, key);
  while (!key.empty() && (key.back() == '\r' || key.back() == ' ')) key.pop_back();
  CPDIT_CHECK(!key.empty(), invalid_argument, "--api-key-file ", path, " holds no key on its first line");
  return key;
}

void run(ServeFlags f) {
  CPDIT_CHECK(f.api.api_key.empty() || f.api_key_file.empty(), invalid_argument,
              "give --api-key or --api-key-file, not both");
  if (!f.api_key_file.empty()) f.api.api_key = read_key_file(f.api_key_file);
  apply_component_flags(f.components, f.source);
  // SIGINT and SIGTERM only set a flag (any thread may take them: some start before this command);
  // the stopper thread below sees it and stops the server.
  std::signal(SIGINT, note_stop_signal);
  std::signal(SIGTERM, note_stop_signal);
  pipeline::StageLog load;
  load.on_end = [](const pipeline::StageStats& s) {
    std::fprintf(stderr, "cpdit serve: %s done in %.2f s\n", s.name.c_str(), s.seconds);
  };
  // Under mpirun every process opens the model; rank 0 serves and the others follow its jobs.
  std::shared_ptr<comm::Communicator> world = comm::launched_by_mpi() ? comm::mpi_world() : nullptr;
  std::optional<serve::ProcessJobs> processes;
  if (world && world->size() > 1) processes.emplace(world);
  const pipeline::Pipeline pipe = pipeline::Pipeline::open(f.source, pipeline::LoadPolicy::resident, &load);
  const serve::JobContext context{pipe, f.ranks, f.limits, lora_choices(f.loras)};
  if (processes && world->rank() != 0) return processes->follow(context);
  Spool spool;
  serve::JobQueue queue(pipe, spool.path, f.max_queue, f.kept_jobs, processes ? &*processes : nullptr);
  std::atomic<bool> healthy{true};
  httplib::Server server;
  server.new_task_queue = [] { return new httplib::ThreadPool(16); };
  serve::add_routes(server, queue, context, f.api, healthy);

  const int port = f.port == 0 ? server.bind_to_any_port(f.host) : (server.bind_to_port(f.host, f.port) ? f.port : -1);
  CPDIT_CHECK(port > 0, io, "cannot listen on ", f.host, ":", f.port, " (in use, or not this machine's address)");
  std::printf("cpdit serve: %s on http://%s:%d\n", pipe.name().c_str(), f.host.c_str(), port);
  std::fflush(stdout);

  std::atomic<bool> listening_ended{false};
  std::thread stopper([&] {
    while (stop_signal == 0 && !listening_ended && queue.broken().empty())
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (listening_ended) return;
    const std::string broken = queue.broken();
    std::fprintf(stderr, "cpdit serve: %s, stopping\n",
                 !broken.empty() ? broken.c_str() : stop_signal == SIGINT ? "SIGINT" : "SIGTERM");
    healthy = false;
    // The queue first: its waiting requests are answered (cancelled) before the server's threads,
    // which wait on them, are joined by stop().
    queue.shutdown(f.drain_seconds);
    server.stop();
  });
  const bool listened = server.listen_after_bind();
  listening_ended = true;
  healthy = false;
  stopper.join();
  queue.shutdown(f.drain_seconds);  // when listening failed: no signal came
  CPDIT_CHECK(queue.broken().empty(), comm, queue.broken());
  CPDIT_CHECK(listened, io, "the server on ", f.host, ":", port, " stopped listening");
}

void add_serve(CLI::App& parent) {
  auto args = std::make_shared<ServeFlags>();
  CLI::App* cmd = parent.add_subcommand("serve", "A resident model behind an HTTP API (OpenAI's images API and jobs)");
  cmd->footer(
      "Opens the model once, then serves requests on it, one at a time on all its ranks, in the order they came:\n"
      "  POST /v1/images/generations   OpenAI's images API (prompt, n, size, response_format b64_json, "
      "output_format; generate's fields beside them)\n"
      "  POST /v1/jobs                 a job whose fields are generate's long flags (prompt, width, steps, seed, "
      "..., output_format)\n"
      "  GET  /v1/jobs/ID[/result|/events], DELETE /v1/jobs/ID   poll, fetch, follow, cancel\n"
      "  GET  /v1/models, /health, /metrics, /openapi.json\n"
      "Example:\n"
      "  cpdit serve --preset flux-mini --port 8080\n"
      "  curl -s localhost:8080/v1/images/generations -d '{\"prompt\": \"a red fox\", \"size\": \"256x256\"}'");
  CLI::Option_group* source = cmd->add_option_group("Model");
  source->add_option("-m,--model", args->source.model, "a diffusers pipeline folder (as generate's --model)");
  source->add_option("--preset", args->source.preset, "a built-in model with seeded random weights (as generate's)");
  source->require_option(1, 2);
  cmd->add_option("--config", args->source.config, "transformer config.json overriding the checkpoint's");
  cmd->add_option("--scheduler-config", args->source.scheduler_config, "scheduler_config.json overriding the folder's");
  add_component_flags(*cmd, *source, args->source, args->components);
  add_dtype_flag(*cmd, args->source.dtype);
  add_lora_flags(*cmd, args->loras, true);
  add_parallel_flags(*cmd, args->ranks);
  add_cfg_flag(*cmd, args->ranks);
  cmd->add_option("--host", args->host, "the address to listen on (default 127.0.0.1: this machine only)");
  cmd->add_option("--port", args->port, "the port (default 8080; 0: a free one, printed)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", args->api.api_key,
                  "a key every request but /health must send as Authorization: Bearer KEY (401 otherwise)");
  cmd->add_option("--api-key-file", args->api_key_file, "the key on this file's first line (kept out of `ps`)");
  cmd->add_option("--max-queue", args->max_queue, "jobs that may wait; one more is answered 429 (default 16)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--kept-jobs", args->kept_jobs,
                  "finished jobs whose state and result stay to be fetched; older ones are forgotten (404) "
                  "(default 64)")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--max-body-bytes", args->api.max_body_bytes, "the largest request body (default 1 MiB; 413 over)")
      ->check(CLI::Range(1024, 1 << 30));
  cmd->add_option("--io-timeout", args->api.io_timeout_seconds,
                  "seconds a client may stall a read or a write before it is dropped (default 30)")
      ->check(CLI::Range(1, 3600));
  cmd->add_option("--max-steps", args->limits.max_steps, "the most steps a request may ask (default 100)")
      ->check(CLI::Range(1, 10000));
  cmd->add_option("--max-side", args->limits.max_side, "the largest width or height a request may ask (default 2048)")
      ->check(CLI::Range(16, 65536));
  cmd->add_option("--max-frames", args->limits.max_frames, "the most frames a video request may ask (default 257)")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--max-images", args->limits.max_images, "OpenAI's largest n (default 4)")->check(CLI::Range(1, 64));
  cmd->add_option("--drain-seconds", args->drain_seconds,
                  "on SIGTERM or SIGINT, seconds the running job has to finish before it is cancelled (default 0)")
      ->check(CLI::Range(0.0, 86400.0));
  cmd->callback([args] { run(*args); });
}

const bool registered = register_command("serve", add_serve);

}  // namespace
}  // namespace cpdit::app
