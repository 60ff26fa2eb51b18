#include "header.hpp"

#include "file_dtype.hpp"

#include <cpdit/core/error.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <set>
#include <tuple>

namespace cpdit::io {

namespace {

using nlohmann::json;

// Deep enough for {name: {"shape": [dims]}}; deeper input is malformed, and stopping early keeps a
// hostile header from costing more than its bytes.
constexpr int kMaxJsonDepth = 4;

struct ParseAbort {
  std::string reason;
};

// Builds the document as json::parse does, refusing nesting deeper than kMaxJsonDepth and a tensor
// name given twice as they stream past. Linear in the header's size: nlohmann's callback parser
// rescans the parent object at every object end, which made a 300k-tensor header take minutes.
class HeaderBuilder {
 public:
  explicit HeaderBuilder(json& result) : dom_(result, true) {}

  bool null() { return dom_.null(); }
  bool boolean(bool value) { return dom_.boolean(value); }
  bool number_integer(json::number_integer_t value) { return dom_.number_integer(value); }
  bool number_unsigned(json::number_unsigned_t value) { return dom_.number_unsigned(value); }
  bool number_float(json::number_float_t value, const std::string& text) { return dom_.number_float(value, text); }
  bool string(json::string_t& value) { return dom_.string(value); }
  bool binary(json::binary_t& value) { return dom_.binary(value); }
  bool start_object(std::size_t size) { return enter() && dom_.start_object(size); }
  bool end_object() { return leave() && dom_.end_object(); }
  bool start_array(std::size_t size) { return enter() && dom_.start_array(size); }
  bool end_array() { return leave() && dom_.end_array(); }
  bool key(json::string_t& name) {
    if (depth_ == 1 && !names_.insert(name).second) throw ParseAbort{"tensor '" + name + "' appears twice"};
    return dom_.key(name);
  }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& token, const Exception& error) {
    return dom_.parse_error(position, token, error);
  }

 private:
  bool enter() {
    if (++depth_ > kMaxJsonDepth) throw ParseAbort{"nested deeper than a safetensors header can be"};
    return true;
  }
  bool leave() {
    --depth_;
    return true;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  std::set<std::string> names_;
  int depth_ = 0;
};

json parse_json_object(const std::string& label, const char* text, size_t length) {
  CPDIT_CHECK(length > 0 && text[0] == '{', format, label,
              ": not a safetensors file (the header is not a JSON object)");
  // JSON never holds a raw NUL, but nlohmann's parser stops at one and would ignore what follows.
  CPDIT_CHECK(std::memchr(text, '\0', length) == nullptr, format, label,
              ": bad safetensors header JSON: it contains a NUL byte");
  try {
    json root;
    HeaderBuilder builder(root);
    json::sax_parse(text, text + length, &builder);
    return root;
  } catch (const ParseAbort& abort) {
    fail(ErrorKind::format, label, ": bad safetensors header: ", abort.reason);
  } catch (const json::exception& e) {
    std::string what = e.what();
    size_t tag_end = what.find("] ");
    fail(ErrorKind::format, label, ": bad safetensors header JSON: ",
         tag_end == std::string::npos ? what : what.substr(tag_end + 2));
  }
}

std::map<std::string, std::string> parse_metadata(const std::string& label, const json& value) {
  std::map<std::string, std::string> metadata;
  if (value.is_null()) return metadata;
  CPDIT_CHECK(value.is_object(), format, label, ": \"__metadata__\" must be an object of strings");
  for (const auto& [key, item] : value.items()) {
    CPDIT_CHECK(item.is_string(), format, label, ": \"__metadata__\" entry '", key,
                "' is not a string");
    metadata[key] = item.get<std::string>();
  }
  return metadata;
}

uint64_t checked_mul(const std::string& where, uint64_t a, uint64_t b) {
  uint64_t product;
  CPDIT_CHECK(!__builtin_mul_overflow(a, b, &product), format, where,
              ": shape is too large (byte size overflows 64 bits)");
  return product;
}

TensorInfo parse_entry(const std::string& label, const std::string& name, const json& entry) {
  const std::string where = label + ": tensor '" + name + "'";
  CPDIT_CHECK(entry.is_object(), format, where, ": entry must be an object with dtype, shape, data_offsets");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    CPDIT_CHECK(entry.contains(key), format, where, ": missing \"", key, "\"");

  TensorInfo info;
  info.name = name;
  const json& dtype = entry["dtype"];
  CPDIT_CHECK(dtype.is_string(), format, where, ": \"dtype\" must be a string");
  info.dtype = dtype.get<std::string>();
  const FileDType* file_dtype = find_file_dtype(info.dtype);
  CPDIT_CHECK(file_dtype, format, where, ": unknown dtype '", info.dtype,
              "' (cpdit reads F32, BF16, F16, I64, BOOL, F64, I32, I16, I8, U8, F8_E4M3, F8_E5M2)");

  const json& shape = entry["shape"];
  CPDIT_CHECK(shape.is_array(), format, where, ": \"shape\" must be an array of non-negative integers");
  uint64_t bytes = file_dtype->size;
  for (const json& dim : shape) {
    CPDIT_CHECK(dim.is_number_unsigned() && dim.get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max()),
                format, where, ": shape ", shape.dump(), " has a dimension that is not a non-negative integer");
    info.shape.push_back(int64_t(dim.get<uint64_t>()));
    bytes = checked_mul(where, bytes, dim.get<uint64_t>());
  }

  const json& offsets = entry["data_offsets"];
  CPDIT_CHECK(offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_unsigned() &&
                  offsets[1].is_number_unsigned(),
              format, where, ": \"data_offsets\" must be two non-negative integers [begin, end]");
  info.begin = offsets[0].get<uint64_t>();
  info.end = offsets[1].get<uint64_t>();
  CPDIT_CHECK(info.begin <= info.end, format, where, ": data_offsets [", info.begin, ", ", info.end,
              "] end before they begin");
  CPDIT_CHECK(info.end - info.begin == bytes, format, where, ": shape ", shape_string(info.shape), " of ",
              info.dtype, " needs ", bytes, " bytes but data_offsets [", info.begin, ", ", info.end,
              "] hold ", info.end - info.begin);
  return info;
}

// Sorted by begin, the ranges must tile [0, data_bytes): each begins where the previous ended.
void check_tiling(const std::string& label, const std::vector<TensorInfo>& tensors, uint64_t data_bytes) {
  uint64_t expected = 0;
  for (const TensorInfo& t : tensors) {
    CPDIT_CHECK(t.begin == expected, format, label, ": tensor '", t.name, "' data_offsets [", t.begin, ", ", t.end,
                "] ", t.begin < expected ? "overlap the previous tensor" : "leave a gap after the previous tensor",
                " (expected it to begin at ", expected, ")");
    expected = t.end;
  }
  CPDIT_CHECK(expected <= data_bytes, format, label, ": truncated: tensors need ", expected,
              " data bytes but the file holds ", data_bytes,
              tensors.empty() ? std::string() : " (last tensor '" + tensors.back().name + "')");
  CPDIT_CHECK(expected == data_bytes, format, label, ": ", data_bytes - expected,
              " unexpected bytes after the last tensor");
}

}  // namespace

Header parse_header(const std::string& label, const std::byte* bytes, size_t size) {
  static_assert(std::endian::native == std::endian::little, "safetensors is little-endian");
  CPDIT_CHECK(size >= 8, format, label, ": not a safetensors file (", size,
              " bytes; the 8-byte header length is missing)");
  uint64_t header_bytes;
  std::memcpy(&header_bytes, bytes, 8);
  CPDIT_CHECK(header_bytes <= kMaxHeaderBytes, format, label, ": header length ", header_bytes,
              " is over the ", kMaxHeaderBytes, "-byte limit (not a safetensors file?)");
  CPDIT_CHECK(header_bytes <= size - 8, format, label, ": header length ", header_bytes,
              " is larger than the file (", size, " bytes); truncated or not a safetensors file");

  json root = parse_json_object(label, reinterpret_cast<const char*>(bytes + 8), header_bytes);
  CPDIT_CHECK(root.is_object(), format, label, ": the safetensors header must be a JSON object");

  Header header;
  header.data_start = 8 + header_bytes;
  for (const auto& [name, entry] : root.items()) {
    CPDIT_CHECK(!name.empty(), format, label, ": a tensor has an empty name");
    if (name == "__metadata__")
      header.metadata = parse_metadata(label, entry);
    else
      header.tensors.push_back(parse_entry(label, name, entry));
  }
  std::sort(header.tensors.begin(), header.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  check_tiling(label, header.tensors, size - header.data_start);
  for (size_t i = 0; i < header.tensors.size(); ++i) header.position[header.tensors[i].name] = i;
  return header;
}

}  // namespace cpdit::io
