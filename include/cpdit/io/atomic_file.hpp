#pragma once
// A file that replaces `path` only when complete: bytes go to a temp file in the same folder, and
// commit() fsyncs it and renames it over `path`. Destroyed without commit (an exception on the way),
// it removes the temp file and leaves any existing `path` untouched; so does SIGINT or SIGTERM.
#include <cstddef>
#include <string>
#include <vector>

namespace cpdit::io {

class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path);  // throws Error(io) when the folder is not writable
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes);
  // Renames the temp file over `path`; inside an OutputBatch it is staged there instead.
  void commit();
  const std::string& temp_path() const { return temp_path_; }

 private:
  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  int temp_slot_ = -1;  // the temp file's entry in the list removed on SIGINT/SIGTERM
};

// Outputs that appear together or not at all: while an OutputBatch is open on a thread, every
// AtomicFile committed on that thread is written and fsynced but kept as its temp file. commit()
// first checks that every target can be replaced (none is a folder), then renames them all; a batch
// destroyed without commit (a later output failed) removes every temp file it holds, so each old
// output stays as it was. One batch per thread at a time.
class OutputBatch {
 public:
  OutputBatch();
  ~OutputBatch();
  OutputBatch(const OutputBatch&) = delete;
  OutputBatch& operator=(const OutputBatch&) = delete;

  void commit();

 private:
  friend class AtomicFile;
  struct Staged {
    std::string path, temp_path;
    int temp_slot = -1;
  };
  // The batch open on this thread, or nullptr.
  static OutputBatch* open_here();
  void stage(Staged file);

  std::vector<Staged> staged_;
};

}  // namespace cpdit::io
