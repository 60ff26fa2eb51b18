#include "gguf_header.hpp"

#include <cpdit/core/block_format.hpp>
#include <cpdit/core/error.hpp>

#include <algorithm>
#include <cstring>
#include <sstream>

namespace cpdit::io {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr int kMaxArrayDepth = 2;        // arrays of arrays (a tokenizer's merges) and no deeper
// ggml's GGML_MAX_DIMS is 4, but ComfyUI-GGUF writes 3-D convolution weights (Wan's patch embedding)
// back with their 5 dims (its fix_5d_tensors step), as the gguf Python package allows.
constexpr uint32_t kMaxDimsGguf = 5;

// The ggml tensor types whose storage size is known here: values per block, bytes per block.
struct GgmlType {
  uint32_t id;
  const char* name;
  uint64_t block_size, block_bytes;
};
constexpr GgmlType kTypes[] = {
    {0, "F32", 1, 4},      {1, "F16", 1, 2},      {2, "Q4_0", 32, 18},   {3, "Q4_1", 32, 20},
    {6, "Q5_0", 32, 22},   {7, "Q5_1", 32, 24},   {8, "Q8_0", 32, 34},   {9, "Q8_1", 32, 36},
    {10, "Q2_K", 256, 84}, {11, "Q3_K", 256, 110}, {12, "Q4_K", 256, 144}, {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210}, {15, "Q8_K", 256, 292}, {24, "I8", 1, 1},     {25, "I16", 1, 2},
    {26, "I32", 1, 4},     {27, "I64", 1, 8},     {28, "F64", 1, 8},     {30, "BF16", 1, 2},
};

const GgmlType* find_type(uint32_t id) {
  for (const GgmlType& t : kTypes)
    if (t.id == id) return &t;
  return nullptr;
}

// Bytes of one scalar of a key-value type; 0 for string (8), array (9) and unknown types.
uint64_t scalar_size(uint32_t type) {
  switch (type) {
    case 0: case 1: case 7: return 1;
    case 2: case 3: return 2;
    case 4: case 5: case 6: return 4;
    case 10: case 11: case 12: return 8;
    default: return 0;
  }
}

const char* value_type_name(uint32_t type) {
  static const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array",
                                "u64", "i64", "f64"};
  return type < 13 ? names[type] : "unknown";
}

// A cursor over the header bytes that refuses to read past the end.
class Reader {
 public:
  Reader(const std::string& label, const std::byte* bytes, size_t size) : label_(label), bytes_(bytes), size_(size) {}

  template <class T>
  T scalar(const char* what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, bytes_ + at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }
  std::string string(const char* what) {
    const uint64_t length = scalar<uint64_t>(what);
    need(length, what);
    std::string s(reinterpret_cast<const char*>(bytes_ + at_), size_t(length));
    at_ += length;
    return s;
  }
  void skip(uint64_t n, const char* what) {
    need(n, what);
    at_ += n;
  }
  uint64_t left() const { return size_ - at_; }
  uint64_t at() const { return at_; }
  // A count of items of at least `min_bytes` each must fit in what is left of the file.
  uint64_t count(const char* what, uint64_t min_bytes) {
    const uint64_t n = scalar<uint64_t>(what);
    CPDIT_CHECK(min_bytes == 0 || n <= left() / min_bytes, format, label_, ": ", what, " ", n,
                " cannot fit in the ", left(), " bytes left of the file (truncated or corrupt GGUF header)");
    return n;
  }

 private:
  void need(uint64_t n, const char* what) {
    CPDIT_CHECK(n <= left(), format, label_, ": GGUF header truncated reading ", what, " (", n, " bytes needed, ",
                left(), " left)");
  }
  const std::string& label_;
  const std::byte* bytes_;
  size_t size_;
  uint64_t at_ = 0;
};

// Reads one value of `type`, returning it written out; arrays nest up to kMaxArrayDepth.
std::string read_value(Reader& r, const std::string& label, const std::string& key, uint32_t type, int depth) {
  std::ostringstream out;
  switch (type) {
    case 0: out << unsigned(r.scalar<uint8_t>("a u8 value")); break;
    case 1: out << int(r.scalar<int8_t>("an i8 value")); break;
    case 2: out << r.scalar<uint16_t>("a u16 value"); break;
    case 3: out << r.scalar<int16_t>("an i16 value"); break;
    case 4: out << r.scalar<uint32_t>("a u32 value"); break;
    case 5: out << r.scalar<int32_t>("an i32 value"); break;
    case 6: out << r.scalar<float>("an f32 value"); break;
    case 7: {
      const uint8_t b = r.scalar<uint8_t>("a bool value");
      CPDIT_CHECK(b <= 1, format, label, ": key '", key, "': bool value ", unsigned(b), " is not 0 or 1");
      out << (b ? "true" : "false");
      break;
    }
    case 8: out << r.string("a string value"); break;
    case 10: out << r.scalar<uint64_t>("a u64 value"); break;
    case 11: out << r.scalar<int64_t>("an i64 value"); break;
    case 12: out << r.scalar<double>("an f64 value"); break;
    case 9: {
      CPDIT_CHECK(depth < kMaxArrayDepth, format, label, ": key '", key, "': arrays nested deeper than ",
                  kMaxArrayDepth);
      const uint32_t element = r.scalar<uint32_t>("an array's element type");
      CPDIT_CHECK(element <= 12, format, label, ": key '", key, "': unknown array element type ", element);
      // Every element takes at least its scalar size, a string or array at least its 8-byte length.
      const uint64_t min_bytes = scalar_size(element) ? scalar_size(element) : 8;
      const uint64_t n = r.count("an array's length", min_bytes);
      if (scalar_size(element)) {
        r.skip(n * min_bytes, "an array's values");  // n * min_bytes <= left: no overflow
      } else {
        for (uint64_t i = 0; i < n; ++i) read_value(r, label, key, element, depth + 1);
      }
      out << "[array of " << n << " " << value_type_name(element) << "]";
      break;
    }
    default: fail(ErrorKind::format, label, ": key '", key, "' has unknown value type ", type);
  }
  return out.str();
}

uint64_t checked_mul(const std::string& label, const std::string& name, uint64_t a, uint64_t b) {
  uint64_t product = 0;
  CPDIT_CHECK(!__builtin_mul_overflow(a, b, &product), format, label, ": tensor '", name,
              "': size overflows 64 bits");
  return product;
}

// x rounded up to a multiple of the power of two `alignment`, or fails when that overflows.
uint64_t align_up(const std::string& label, uint64_t x, uint64_t alignment) {
  uint64_t padded = 0;
  CPDIT_CHECK(!__builtin_add_overflow(x, alignment - 1, &padded), format, label, ": offset ", x,
              " overflows 64 bits when aligned");
  return padded & ~(alignment - 1);
}

GgufTensorInfo read_tensor_info(Reader& r, const std::string& label) {
  GgufTensorInfo info;
  info.name = r.string("a tensor name");
  // No model has a tensor without a name; one would be an unexpected key no message can show.
  CPDIT_CHECK(!info.name.empty(), format, label, ": a tensor has an empty name");
  const uint32_t dims = r.scalar<uint32_t>("a tensor's dim count");
  CPDIT_CHECK(dims >= 1 && dims <= kMaxDimsGguf, format, label, ": tensor '", info.name, "' has ", dims,
              " dims (cpdit reads 1 to ", kMaxDimsGguf, ")");
  std::vector<uint64_t> ne(dims);
  uint64_t numel = 1;
  for (uint64_t& d : ne) {
    d = r.scalar<uint64_t>("a tensor dim");
    CPDIT_CHECK(d >= 1 && d <= uint64_t(INT64_MAX), format, label, ": tensor '", info.name, "' has a dim of ", d);
    numel = checked_mul(label, info.name, numel, d);
  }
  const uint32_t type_id = r.scalar<uint32_t>("a tensor's type");
  const GgmlType* type = find_type(type_id);
  CPDIT_CHECK(type != nullptr, unsupported, label, ": tensor '", info.name, "' has ggml type ", type_id,
              ", which cpdit does not know");
  CPDIT_CHECK(ne[0] % type->block_size == 0, format, label, ": tensor '", info.name, "' (", type->name,
              ") has a first dim of ", ne[0], ", not a multiple of its block size ", type->block_size);
  info.type = type->name;
  info.nbytes = checked_mul(label, info.name, numel / type->block_size, type->block_bytes);
  info.offset = r.scalar<uint64_t>("a tensor's offset");
  for (uint32_t i = dims; i-- > 0;) info.shape.push_back(int64_t(ne[i]));
  CPDIT_CHECK(shape_numel(info.shape) >= 0, format, label, ": tensor '", info.name, "' is too large");
  return info;
}

}  // namespace

GgufHeader parse_gguf_header(const std::string& label, const std::byte* bytes, size_t size) {
  Reader r(label, bytes, size);
  CPDIT_CHECK(size >= 4 && r.scalar<uint32_t>("the magic") == kMagic, format, label,
              ": not a GGUF file (it does not start with \"GGUF\")");
  GgufHeader h;
  h.version = r.scalar<uint32_t>("the version");
  CPDIT_CHECK(h.version == 2 || h.version == 3, unsupported, label, ": GGUF version ", h.version,
              " (cpdit reads versions 2 and 3)");
  // Minimal sizes bound the counts: a tensor info is at least 8 + 4 + 8 + 4 + 8 bytes, a key-value 8 + 4 + 1.
  const uint64_t n_tensors = r.count("the tensor count", 32);
  const uint64_t n_values = r.count("the key-value count", 13);

  for (uint64_t i = 0; i < n_values; ++i) {
    std::string key = r.string("a key");
    const uint32_t type = r.scalar<uint32_t>("a value type");
    CPDIT_CHECK(!h.metadata.count(key), format, label, ": key '", key, "' appears twice");
    if (key == "general.alignment") {
      CPDIT_CHECK(type == 4, format, label, ": general.alignment must be a u32, got ", value_type_name(type));
      const uint32_t a = r.scalar<uint32_t>("general.alignment");
      CPDIT_CHECK(a != 0 && (a & (a - 1)) == 0, format, label, ": general.alignment ", a, " is not a power of two");
      h.alignment = a;
      h.metadata[key] = std::to_string(a);
    } else {
      h.metadata[key] = read_value(r, label, key, type, 0);
    }
  }

  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo info = read_tensor_info(r, label);
    CPDIT_CHECK(info.offset % h.alignment == 0, format, label, ": tensor '", info.name, "' starts at offset ",
                info.offset, ", not a multiple of the alignment ", h.alignment);
    CPDIT_CHECK(h.position.emplace(info.name, i).second, format, label, ": tensor '", info.name, "' appears twice");
    h.tensors.push_back(std::move(info));
  }
  h.data_start = align_up(label, r.at(), h.alignment);
  CPDIT_CHECK(h.data_start <= size || n_tensors == 0, format, label, ": the data section starts at byte ",
              h.data_start, ", past the end of the ", size, "-byte file");

  // The tensors must tile the data section: in offset order, each starts where the previous one
  // ends (rounded up to the alignment), so none overlaps another and no bytes hide between them.
  std::sort(h.tensors.begin(), h.tensors.end(),
            [](const GgufTensorInfo& a, const GgufTensorInfo& b) { return a.offset < b.offset; });
  uint64_t expected = 0;
  const uint64_t data_size = size > h.data_start ? size - h.data_start : 0;
  for (size_t i = 0; i < h.tensors.size(); ++i) {
    const GgufTensorInfo& t = h.tensors[i];
    CPDIT_CHECK(t.offset == expected, format, label, ": tensor '", t.name, "' starts at offset ", t.offset,
                " of the data section, expected ", expected, " (tensors must follow one another, aligned)");
    CPDIT_CHECK(t.offset <= data_size && t.nbytes <= data_size - t.offset, format, label, ": tensor '", t.name,
                "' (", t.nbytes, " bytes at offset ", t.offset, ") runs past the end of the file");
    expected = align_up(label, t.offset + t.nbytes, h.alignment);
    h.position[t.name] = i;
  }
  CPDIT_CHECK(data_size <= expected, format, label, ": ", data_size - expected,
              " bytes after the last tensor that no tensor claims");
  return h;
}

}  // namespace cpdit::io
