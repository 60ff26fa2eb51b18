#pragma once
// The state behind a SafetensorsFile: the file's bytes (a private memory mapping, or a buffer) and
// its validated header. Zero-copy tensors hold a shared_ptr to it, so the bytes outlive every view.
#include "header.hpp"

#include <cstddef>
#include <memory>
#include <string>

namespace cpdit::io {

struct MappedFile {
  std::string path;
  std::shared_ptr<std::byte> bytes;  // releases the mapping (munmap) or buffer when the last user goes
  size_t size = 0;
  Header header;
};

// Maps a whole file copy-on-write (PROT_READ | PROT_WRITE, MAP_PRIVATE): a tensor view that is
// written to changes private pages, never the file. Throws Error(io) naming the file.
std::shared_ptr<std::byte> map_file(const std::string& path, size_t& size);

}  // namespace cpdit::io
