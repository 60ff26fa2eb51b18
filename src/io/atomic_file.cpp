#include <cpdit/core/error.hpp>
#include <cpdit/io/atomic_file.hpp>

#include "temp_files.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
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
  const bool renamed = closed == 0 && ::rename(temp_path_.c_str(), path_.c_str()) == 0;
  const int err = errno;
  if (!renamed) ::unlink(temp_path_.c_str());
  forget_temp_file(temp_slot_);
  CPDIT_CHECK(renamed, io, "cannot replace ", path_, ": ", std::strerror(err));
  sync_folder_of(path_);
}

}  // namespace cpdit::io
