#include <cpdit/core/error.hpp>
#include <cpdit/io/atomic_file.hpp>
#include <cpdit/io/json.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace cpdit::io {

std::string read_text(const std::string& path) {
  CPDIT_CHECK(!std::filesystem::is_directory(path), io, path, " is a folder, expected a file");
  std::ifstream in(path, std::ios::binary);
  CPDIT_CHECK(in, io, "cannot open ", path, ": ", std::strerror(errno));
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
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
