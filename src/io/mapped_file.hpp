#pragma once
// A file's bytes as SafetensorsFile and GgufFile read them: a private memory mapping of the file, or
// a buffer handed in (from_bytes: the fuzzers, tests). Zero-copy tensors hold a shared_ptr to the
// state around them, so the bytes outlive every view.
#include "header.hpp"

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace cpdit::io {

struct FileBytes {
  std::string path;  // or the buffer's label: it starts every error message about the bytes
  std::shared_ptr<std::byte> bytes;  // releases the mapping (munmap) or buffer when the last user goes
  size_t size = 0;
};

// Maps a whole file copy-on-write (PROT_READ | PROT_WRITE, MAP_PRIVATE): a tensor view that is
// written to changes private pages, never the file. Throws Error(io) naming the file.
FileBytes map_file(const std::string& path);

// `buffer` held as a file's bytes, `label` standing for the path.
FileBytes hold_bytes(std::vector<std::byte> buffer, const std::string& label);

// The state behind a SafetensorsFile: its bytes and their validated header.
struct MappedFile : FileBytes {
  Header header;
};

}  // namespace cpdit::io
