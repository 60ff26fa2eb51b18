#include <cpdit/core/error.hpp>
#include <cpdit/io/atomic_file.hpp>

#include "temp_files.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cpdit::io {

namespace {

std::string unique_temp_path(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  return path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

// Makes the rename itself durable. Best effort: the new file is already in place.
void sync_folder_of(const std::string& path) {
  std::filesystem::path folder = std::filesystem::path(path).parent_path();
  int fd = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

thread_local OutputBatch* open_batch = nullptr;

}  // namespace

AtomicFile::AtomicFile(const std::string& path) : path_(path), temp_path_(unique_temp_path(path)) {
  // 0666 so the umask decides the final permissions, as for any new file.
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  CPDIT_CHECK(fd_ >= 0, io, "cannot write ", path_, ": ", std::strerror(errno),
              " (is the folder there and writable?)");
  temp_slot_ = remember_temp_file(temp_path_);
}

AtomicFile::~AtomicFile() {
  if (fd_ < 0) return;  // committed (or never opened)
  ::close(fd_);
  ::unlink(temp_path_.c_str());
  forget_temp_file(temp_slot_);
}

void AtomicFile::write(const void* data, size_t bytes) {
  CPDIT_CHECK(fd_ >= 0, internal, "write to ", path_, " after commit");
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    CPDIT_CHECK(n > 0, io, "writing ", path_, " failed: ", std::strerror(errno));
    p += n;
    bytes -= size_t(n);
  }
}

void AtomicFile::commit() {
  CPDIT_CHECK(fd_ >= 0, internal, "commit of ", path_, " twice");
  CPDIT_CHECK(::fsync(fd_) == 0, io, "writing ", path_, " failed (fsync): ", std::strerror(errno));
  int closed = ::close(fd_);
  fd_ = -1;  // from here on the destructor has nothing to clean; failures remove the temp file here
  if (OutputBatch* batch = OutputBatch::open_here(); batch != nullptr && closed == 0) {
    batch->stage({path_, temp_path_, temp_slot_});  // the batch renames it, or removes it
    return;
  }
  const bool renamed = closed == 0 && ::rename(temp_path_.c_str(), path_.c_str()) == 0;
  const int err = errno;
  if (!renamed) ::unlink(temp_path_.c_str());
  forget_temp_file(temp_slot_);
  CPDIT_CHECK(renamed, io, "cannot replace ", path_, ": ", std::strerror(err));
  sync_folder_of(path_);
}

OutputBatch::OutputBatch() {
  CPDIT_CHECK(open_batch == nullptr, internal, "an output batch is already open on this thread");
  open_batch = this;
}

OutputBatch::~OutputBatch() {
  open_batch = nullptr;
  for (const Staged& file : staged_) {  // not committed: the old outputs stay
    ::unlink(file.temp_path.c_str());
    forget_temp_file(file.temp_slot);
  }
}

OutputBatch* OutputBatch::open_here() { return open_batch; }

void OutputBatch::stage(Staged file) {
  // Written twice in one batch: the later bytes win, as they would have without the batch.
  for (Staged& earlier : staged_)
    if (earlier.path == file.path) {
      ::unlink(earlier.temp_path.c_str());
      forget_temp_file(earlier.temp_slot);
      earlier = std::move(file);
      return;
    }
  staged_.push_back(std::move(file));
}

void OutputBatch::commit() {
  // Everything that can be checked is checked before the first rename: a rename onto a folder is
  // the one failure a written temp file beside its target still meets.
  for (const Staged& file : staged_) {
    struct stat target;
    CPDIT_CHECK(::stat(file.path.c_str(), &target) != 0 || !S_ISDIR(target.st_mode), io, "cannot replace ",
                file.path, ": it is a folder (no output was written)");
  }
  std::vector<std::string> written;
  while (!staged_.empty()) {
    const Staged file = staged_.front();
    const bool renamed = ::rename(file.temp_path.c_str(), file.path.c_str()) == 0;
    const int err = errno;
    if (renamed) {
      forget_temp_file(file.temp_slot);
      staged_.erase(staged_.begin());
      sync_folder_of(file.path);
      written.push_back(file.path);
      continue;
    }
    std::string done;
    for (const std::string& path : written) done += (done.empty() ? "" : ", ") + path;
    fail(ErrorKind::io, "cannot replace ", file.path, ": ", std::strerror(err),
         written.empty() ? std::string(" (no output was written)") : " (already written: " + done + ")");
  }
}

}  // namespace cpdit::io
