#include "mapped_file.hpp"

#include <cpdit/core/error.hpp>

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cpdit::io {

FileBytes map_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer. Regular files ignore it.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  CPDIT_CHECK(fd >= 0, io, "cannot open ", path, ": ", std::strerror(errno));
  struct stat st = {};
  const bool stat_ok = ::fstat(fd, &st) == 0;
  const int stat_errno = errno;
  if (!stat_ok || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(ErrorKind::io, "cannot read ", path, ": ",
         !stat_ok              ? std::strerror(stat_errno)
         : S_ISDIR(st.st_mode) ? "it is a folder"
                               : "not a regular file (a device, pipe or socket)");
  }
  const size_t size = size_t(st.st_size);
  if (size == 0) {  // mmap refuses length 0; the header check reports the empty file
    ::close(fd);
    return {path, nullptr, 0};
  }
  void* data = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  int err = errno;
  ::close(fd);  // the mapping stays valid without the descriptor
  CPDIT_CHECK(data != MAP_FAILED, io, "cannot map ", path, ": ", std::strerror(err));
  return {path, std::shared_ptr<std::byte>(static_cast<std::byte*>(data), [size](std::byte* p) { ::munmap(p, size); }),
          size};
}

FileBytes hold_bytes(std::vector<std::byte> buffer, const std::string& label) {
  auto held = std::make_shared<std::vector<std::byte>>(std::move(buffer));
  // The aliasing constructor: a pointer to the data that keeps the whole vector alive.
  return {label, std::shared_ptr<std::byte>(held, held->data()), held->size()};
}

}  // namespace cpdit::io
