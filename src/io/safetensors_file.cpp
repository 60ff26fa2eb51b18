#include "file_dtype.hpp"
#include "mapped_file.hpp"
#include "tensor_lookup.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/safetensors.hpp>

#include <cstring>

namespace cpdit::io {

namespace {

// Bytes of a BOOL tensor other than 0 and 1 are not valid bool objects (reading one is undefined
// behaviour), so they are rejected before a view is handed out.
void check_bool_bytes(const std::string& path, const TensorInfo& info, const std::byte* data, size_t n) {
  for (size_t i = 0; i < n; ++i)
    CPDIT_CHECK(uint8_t(data[i]) <= 1, format, path, ": tensor '", info.name, "': BOOL byte ", i,
                " is ", int(data[i]), " (must be 0 or 1)");
}

std::shared_ptr<const MappedFile> parse_safetensors(FileBytes bytes) {
  Header header = parse_header(bytes.path, bytes.bytes.get(), bytes.size);
  return std::make_shared<const MappedFile>(MappedFile{std::move(bytes), std::move(header)});
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile opened;
  opened.file_ = parse_safetensors(map_file(path));
  return opened;
}

SafetensorsFile SafetensorsFile::from_bytes(std::vector<std::byte> bytes, const std::string& label) {
  SafetensorsFile opened;
  opened.file_ = parse_safetensors(hold_bytes(std::move(bytes), label));
  return opened;
}

const std::string& SafetensorsFile::path() const { return file_->path; }

const std::map<std::string, std::string>& SafetensorsFile::metadata() const { return file_->header.metadata; }

std::vector<std::string> SafetensorsFile::names() const { return tensor_names(file_->header); }

bool SafetensorsFile::contains(const std::string& name) const { return file_->header.position.count(name) > 0; }

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  return find_tensor(file_->header, file_->path, name);
}

Weight SafetensorsFile::weight(const std::string& name) const {
  const TensorInfo& info = this->info(name);
  if ((info.dtype != "F8_E4M3" && info.dtype != "F8_E5M2") || info.shape.size() != 2) return Weight(get(name));
  std::byte* data = file_->bytes.get() + file_->header.data_start + info.begin;
  return Weight::blocks(info.shape, info.dtype, Tensor::borrow(data, info.shape, DType::boolean, file_));
}

Tensor SafetensorsFile::get(const std::string& name) const {
  const TensorInfo& info = this->info(name);
  const FileDType& dtype = *find_file_dtype(info.dtype);  // known: the header was validated
  CPDIT_CHECK(info.shape.size() <= size_t(kMaxDims), unsupported, file_->path, ": tensor '", name, "' has ",
              info.shape.size(), " dims; cpdit tensors have at most ", kMaxDims);
  std::byte* data = file_->bytes.get() + file_->header.data_start + info.begin;
  size_t n = size_t(shape_numel(info.shape));
  switch (dtype.load) {
    case LoadAs::native: {
      if (dtype.native == DType::boolean) check_bool_bytes(file_->path, info, data, n);
      // Typed access through a misaligned pointer is undefined behaviour: copy those.
      if (reinterpret_cast<uintptr_t>(data) % dtype.size == 0)
        return Tensor::borrow(data, info.shape, dtype.native, file_);
      Tensor copy = Tensor::empty(info.shape, dtype.native);
      if (n > 0) std::memcpy(copy.raw(), data, info.end - info.begin);
      return copy;
    }
    case LoadAs::f32: {
      Tensor out = Tensor::empty(info.shape, DType::f32);
      decode_to_f32(dtype, data, out.data<float>(), n);
      return out;
    }
    case LoadAs::i64: {
      Tensor out = Tensor::empty(info.shape, DType::i64);
      decode_to_i64(dtype, data, out.data<int64_t>(), n);
      return out;
    }
    case LoadAs::unsupported:
      break;
  }
  fail(ErrorKind::unsupported, file_->path, ": tensor '", name, "' has dtype ", info.dtype,
       ", which cpdit cannot load (convert it to F32, BF16 or F16)");
}

std::map<std::string, Tensor> load_safetensors(const std::string& path) {
  SafetensorsFile file = SafetensorsFile::open(path);
  std::map<std::string, Tensor> tensors;
  for (const std::string& name : file.names()) tensors.emplace(name, file.get(name));
  return tensors;
}

}  // namespace cpdit::io
