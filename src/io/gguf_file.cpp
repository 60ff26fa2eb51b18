#include "gguf_header.hpp"
#include "mapped_file.hpp"
#include "tensor_lookup.hpp"

#include <cpdit/core/block_format.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/io/gguf.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace cpdit::io {

// The state behind a GgufFile: its bytes and their validated header.
struct GgufMapping : FileBytes {
  GgufHeader header;
};

namespace {
std::shared_ptr<const GgufMapping> parse_gguf(FileBytes bytes) {
  GgufHeader header = parse_gguf_header(bytes.path, bytes.bytes.get(), bytes.size);
  return std::make_shared<const GgufMapping>(GgufMapping{std::move(bytes), std::move(header)});
}

// A dense tensor of `dtype` at `data`: a view of the mapping when aligned for its type (an alignment
// below the element size allows misaligned data, which typed access may not read), else a copy.
Tensor dense(const std::shared_ptr<const GgufMapping>& file, std::byte* data, const Shape& shape, DType dtype,
             size_t nbytes) {
  if (reinterpret_cast<uintptr_t>(data) % dtype_size(dtype) == 0) return Tensor::borrow(data, shape, dtype, file);
  Tensor copy = Tensor::empty(shape, dtype);
  std::memcpy(copy.raw(), data, nbytes);
  return copy;
}
}  // namespace

GgufFile GgufFile::open(const std::string& path) {
  GgufFile opened;
  opened.file_ = parse_gguf(map_file(path));
  return opened;
}

GgufFile GgufFile::from_bytes(std::vector<std::byte> bytes, const std::string& label) {
  GgufFile opened;
  opened.file_ = parse_gguf(hold_bytes(std::move(bytes), label));
  return opened;
}

const std::string& GgufFile::path() const { return file_->path; }
uint32_t GgufFile::version() const { return file_->header.version; }
const std::map<std::string, std::string>& GgufFile::metadata() const { return file_->header.metadata; }

std::vector<std::string> GgufFile::names() const { return tensor_names(file_->header); }

bool GgufFile::contains(const std::string& name) const { return file_->header.position.count(name) > 0; }

const GgufTensorInfo& GgufFile::info(const std::string& name) const {
  return find_tensor(file_->header, file_->path, name);
}

Weight GgufFile::get(const std::string& name) const {
  const GgufTensorInfo& info = this->info(name);
  std::byte* data = file_->bytes.get() + file_->header.data_start + info.offset;
  if (info.type == "F32") return dense(file_, data, info.shape, DType::f32, info.nbytes);
  if (info.type == "F16") return dense(file_, data, info.shape, DType::f16, info.nbytes);
  if (info.type == "BF16") return dense(file_, data, info.shape, DType::bf16, info.nbytes);
  const BlockFormat* format = find_block_format(info.type);
  CPDIT_CHECK(format != nullptr, unsupported, file_->path, ": tensor '", name, "' is ", info.type,
              ", which cpdit does not compute with (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)");
  CPDIT_CHECK(info.shape.size() == 2, unsupported, file_->path, ": tensor '", name, "' is ", info.type, " with ",
              info.shape.size(), " dims; cpdit computes with quantised matrices only");
  // Each row's blocks as bytes; bytes need no alignment.
  const Shape bytes = {info.shape[0], int64_t(info.nbytes) / info.shape[0]};
  return Weight::blocks(info.shape, info.type, Tensor::borrow(data, bytes, DType::boolean, file_));
}

bool is_gguf_file(const std::string& path) {
  // Only a regular file is read: opening a FIFO would block here, before the mapping's one-line refusal.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

}  // namespace cpdit::io
