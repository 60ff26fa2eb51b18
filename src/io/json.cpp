#include <cpdit/core/error.hpp>
#include <cpdit/io/atomic_file.hpp>
#include <cpdit/io/json.hpp>

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace cpdit::io {

std::string read_text(const std::string& path, int64_t max_bytes) {
  // Checked by name before it is opened: a FIFO would block the open, a device (/dev/zero) never end.
  struct stat info;
  CPDIT_CHECK(::stat(path.c_str(), &info) == 0, io, "cannot open ", path, ": ", std::strerror(errno));
  CPDIT_CHECK(!S_ISDIR(info.st_mode), io, path, " is a folder, expected a file");
  CPDIT_CHECK(S_ISREG(info.st_mode), io, path, " is not a regular file");
  CPDIT_CHECK(info.st_size <= max_bytes, io, path, " is ", info.st_size, " bytes: more than the ", max_bytes,
              " a file of its kind may hold");
  std::ifstream in(path, std::ios::binary);
  CPDIT_CHECK(in, io, "cannot open ", path, ": ", std::strerror(errno));
  // Read to its size at the check, not to its end: a file that grows meanwhile is not followed.
  std::string text(size_t(info.st_size), '\0');
  in.read(text.data(), std::streamsize(text.size()));
  text.resize(size_t(in.gcount()));
  CPDIT_CHECK(!in.bad(), io, "cannot read ", path);
  return text;
}

nlohmann::json parse_json(std::string_view text, const std::string& source) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // e.what() reads "[json.exception.parse_error.101] parse error at line 3, column 7: ..."; a number
    // too large for a double is an out_of_range error ("number overflow parsing '44E777'").
    std::string what = e.what();
    size_t tag_end = what.find("] ");
    fail(ErrorKind::format, source, ": invalid JSON: ",
         tag_end == std::string::npos ? what : what.substr(tag_end + 2));
  }
}

nlohmann::json read_json(const std::string& path) { return parse_json(read_text(path), path); }

void write_text_atomic(const std::string& path, const std::string& text) {
  AtomicFile file(path);
  file.write(text.data(), text.size());
  file.commit();
}

}  // namespace cpdit::io
