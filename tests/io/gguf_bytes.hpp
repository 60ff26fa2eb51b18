#pragma once
// GGUF files assembled byte by byte, so that tests control exactly what the reader sees.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace cpdit::io::test {

struct GgufBytes {
  std::string header;  // magic through the last tensor info
  std::string data;    // the data section

  template <class T>
  GgufBytes& put(T v) {
    header.append(reinterpret_cast<const char*>(&v), sizeof(T));
    return *this;
  }
  GgufBytes& str(const std::string& s) {
    put<uint64_t>(s.size());
    header += s;
    return *this;
  }
  // "GGUF", version, counts.
  static GgufBytes start(uint64_t tensors, uint64_t values, uint32_t version = 3) {
    GgufBytes b;
    b.header = "GGUF";
    b.put<uint32_t>(version).put<uint64_t>(tensors).put<uint64_t>(values);
    return b;
  }
  // A tensor info: name, dims (fastest first, as GGUF stores them), ggml type id, offset.
  GgufBytes& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
    str(name).put<uint32_t>(uint32_t(dims.size()));
    for (uint64_t d : dims) put<uint64_t>(d);
    return put<uint32_t>(type).put<uint64_t>(offset);
  }
  // The file: header padded to `alignment`, then the data.
  std::string file(size_t alignment = 32) const {
    std::string out = header;
    out.resize((out.size() + alignment - 1) / alignment * alignment, '\0');
    return out + data;
  }
};

}  // namespace cpdit::io::test
