#include "file_dtype.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/atomic_file.hpp>
#include <cpdit/io/safetensors.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <tuple>

namespace cpdit::io {

namespace {

struct Entry {
  const std::string* name;
  const Tensor* tensor;
};

// The header JSON with every entry in file order, padded with spaces to a multiple of 8 bytes so
// that the data section starts 8-aligned.
std::string header_text(const std::string& path, const std::vector<Entry>& entries,
                        const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const Entry& e : entries) {
    uint64_t bytes = e.tensor->nbytes();
    header[*e.name] = {{"dtype", file_dtype_name(e.tensor->dtype())},
                       {"shape", e.tensor->shape()},
                       {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::type_error&) {
    fail(ErrorKind::invalid_argument, "cannot write ", path, ": a tensor name or metadata entry is not valid UTF-8");
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

}  // namespace

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  static_assert(std::endian::native == std::endian::little, "safetensors is little-endian");
  std::vector<Entry> entries;
  for (const auto& [name, tensor] : tensors) {
    CPDIT_CHECK(!name.empty() && name != "__metadata__", invalid_argument, "cannot write ", path,
                ": '", name, "' is not a usable tensor name");
    CPDIT_CHECK(tensor.defined(), invalid_argument, "cannot write ", path, ": tensor '", name, "' is undefined");
    entries.push_back({&name, &tensor});
  }
  // The reference writer's order: larger elements first (so every tensor is aligned), then by name.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    int rank_a = file_dtype_rank(a.tensor->dtype()), rank_b = file_dtype_rank(b.tensor->dtype());
    return std::tie(rank_a, *a.name) < std::tie(rank_b, *b.name);
  });
  std::string header = header_text(path, entries, metadata);

  AtomicFile file(path);
  uint64_t header_bytes = header.size();
  file.write(&header_bytes, 8);
  file.write(header.data(), header.size());
  for (const Entry& e : entries) {
    Tensor packed = e.tensor->contiguous();
    if (packed.nbytes() > 0) file.write(packed.raw(), packed.nbytes());
  }
  file.commit();
}

}  // namespace cpdit::io
