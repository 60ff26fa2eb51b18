#include "output_paths.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/model_files.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace cpdit::app {

namespace fs = std::filesystem;

namespace {
bool same_file(const std::string& a, const std::string& b) {
  std::error_code error;
  if (fs::exists(a, error) && fs::exists(b, error)) return fs::equivalent(a, b, error);
  return fs::weakly_canonical(a, error) == fs::weakly_canonical(b, error);
}
}  // namespace

void refuse_overwrite(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const NamedPath& out = outputs[i];
    if (out.path.empty()) continue;
    for (const NamedPath& in : inputs)
      CPDIT_CHECK(in.path.empty() || !same_file(out.path, in.path), invalid_argument, out.flag, " ", out.path,
                  " is the file ", in.flag, " reads (", in.path, "); write the output elsewhere");
    for (size_t j = i + 1; j < outputs.size(); ++j)
      CPDIT_CHECK(outputs[j].path.empty() || !same_file(out.path, outputs[j].path), invalid_argument, out.flag, " and ",
                  outputs[j].flag, " name the same file ", out.path, "; give each output its own path");
  }
}

std::vector<NamedPath> folder_inputs(const std::string& flag, const std::string& path) {
  std::vector<NamedPath> inputs{{flag, path}};
  std::error_code error;
  if (path.empty() || !fs::is_directory(path, error)) return inputs;
  for (auto it = fs::recursive_directory_iterator(path, fs::directory_options::skip_permission_denied, error);
       !error && it != fs::recursive_directory_iterator(); it.increment(error))
    if (it->is_regular_file(error)) inputs.push_back({flag, it->path().string()});
  return inputs;
}

std::vector<NamedPath> model_inputs(const std::string& flag, const std::string& path, const std::string& component,
                                    const std::optional<std::string>& config) {
  const io::ModelFiles files = io::resolve_model(path, component, config);
  std::vector<NamedPath> inputs = folder_inputs(flag, path);
  inputs.push_back({flag, files.weights});
  if (files.config) inputs.push_back({flag, *files.config});
  // A sharded index names shards beside it; any file there may be one.
  const std::string index_suffix = ".index.json";
  if (files.weights.size() > index_suffix.size() &&
      files.weights.compare(files.weights.size() - index_suffix.size(), index_suffix.size(), index_suffix) == 0)
    for (const fs::directory_entry& entry : fs::directory_iterator(fs::absolute(files.weights).parent_path()))
      if (entry.is_regular_file()) inputs.push_back({flag, entry.path().string()});
  return inputs;
}

void refuse_paths_inside(const NamedPath& folder, const std::vector<NamedPath>& paths) {
  if (folder.path.empty()) return;
  std::error_code error;
  const fs::path root = fs::weakly_canonical(folder.path, error);
  for (const NamedPath& in : paths) {
    if (in.path.empty()) continue;
    const fs::path file = fs::weakly_canonical(in.path, error);
    // `file` lies in `root` when root's parts are its first parts.
    const auto [end, rest] = std::mismatch(root.begin(), root.end(), file.begin(), file.end());
    CPDIT_CHECK(end != root.end() || rest == file.end(), invalid_argument, folder.flag, " ", folder.path,
                " is replaced whole by the output, but ", in.flag, " ", in.path, " lies in it; give a folder apart");
  }
}

void print_written(const std::vector<NamedPath>& outputs) {
  for (const NamedPath& o : outputs)
    if (!o.path.empty()) std::printf("wrote %s\n", o.path.c_str());
}

}  // namespace cpdit::app
