#pragma once
// A file that replaces `path` only when complete: bytes go to a temp file in the same folder, and
// commit() fsyncs it and renames it over `path`. Destroyed without commit (an exception on the way),
// it removes the temp file and leaves any existing `path` untouched; so does SIGINT or SIGTERM.
#include <cstddef>
#include <string>

namespace cpdit::io {

class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path);  // throws Error(io) when the folder is not writable
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes);
  void commit();
  const std::string& temp_path() const { return temp_path_; }

 private:
  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  int temp_slot_ = -1;  // the temp file's entry in the list removed on SIGINT/SIGTERM
};

}  // namespace cpdit::io
