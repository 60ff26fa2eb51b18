#pragma once
// Finding a tensor by name in a validated header, for SafetensorsFile and GgufFile alike: both keep
// their tensors in a vector, in the order their format fixes, and each name's index in `position`.
#include <cpdit/core/error.hpp>

#include <string>
#include <vector>

namespace cpdit::io {

// The tensor names in the header's order.
template <class Header>
std::vector<std::string> tensor_names(const Header& header) {
  std::vector<std::string> names;
  names.reserve(header.tensors.size());
  for (const auto& tensor : header.tensors) names.push_back(tensor.name);
  return names;
}

// The header's entry for `name`; a one-line Error naming the file (`path`) when it has none.
template <class Header>
const auto& find_tensor(const Header& header, const std::string& path, const std::string& name) {
  auto it = header.position.find(name);
  CPDIT_CHECK(it != header.position.end(), invalid_argument, path, ": no tensor '", name, "'");
  return header.tensors[it->second];
}

}  // namespace cpdit::io
