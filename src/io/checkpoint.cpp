#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/io/model_files.hpp>
#include <cpdit/io/safetensors.hpp>

#include <filesystem>

namespace cpdit::io {

namespace fs = std::filesystem;

namespace {
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

Checkpoint Checkpoint::open(const std::string& path) {
  Checkpoint checkpoint;
  checkpoint.path_ = path;
  // A folder (a model's or a diffusers pipeline's) is resolved to its weights file.
  std::string file = fs::is_directory(path) ? resolve_model(path).weights : path;
  if (is_gguf_file(file)) {
    checkpoint.gguf_ = GgufFile::open(file);
    for (const std::string& name : checkpoint.gguf_->names()) {
      const GgufTensorInfo& t = checkpoint.gguf_->info(name);
      checkpoint.gguf_info_[name] = TensorInfo{name, t.type, t.shape, t.offset, t.offset + t.nbytes};
    }
    return checkpoint;
  }
  if (!ends_with(file, ".json")) {
    checkpoint.shards_.push_back(SafetensorsFile::open(file));
    for (const std::string& name : checkpoint.shards_[0].names()) checkpoint.shard_of_[name] = 0;
    return checkpoint;
  }

  // A sharded index: {"weight_map": {tensor: shard file}}, shard files relative to the index.
  nlohmann::json index = read_json(file);
  CPDIT_CHECK(index.is_object() && index.contains("weight_map") && index["weight_map"].is_object(), format,
              file, ": a safetensors index needs a \"weight_map\" object of tensor name -> shard file");
  fs::path folder = fs::path(file).parent_path();
  std::map<std::string, size_t> shard_index;  // shard file name -> index in shards_
  for (const auto& [name, shard] : index["weight_map"].items()) {
    CPDIT_CHECK(shard.is_string(), format, file, ": weight_map entry '", name, "' is not a file name");
    const std::string shard_name = shard.get<std::string>();
    auto [it, is_new] = shard_index.emplace(shard_name, checkpoint.shards_.size());
    if (is_new) {
      std::string shard_path = (folder / shard_name).string();
      CPDIT_CHECK(fs::exists(shard_path), io, file, ": shard ", shard_name, " (of tensor '", name,
                  "') is missing; expected ", shard_path);
      checkpoint.shards_.push_back(SafetensorsFile::open(shard_path));
    }
    CPDIT_CHECK(checkpoint.shards_[it->second].contains(name), format, file, ": tensor '", name,
                "' is listed for shard ", shard_name, " but that shard does not hold it");
    checkpoint.shard_of_[name] = it->second;
  }
  // A tensor stored in two shards makes the checkpoint ambiguous.
  std::map<std::string, size_t> holder;
  for (size_t s = 0; s < checkpoint.shards_.size(); ++s)
    for (const std::string& name : checkpoint.shards_[s].names()) {
      auto [it, is_new] = holder.emplace(name, s);
      CPDIT_CHECK(is_new, format, file, ": tensor '", name, "' is stored in two shards, ",
                  checkpoint.shards_[it->second].path(), " and ", checkpoint.shards_[s].path());
    }
  return checkpoint;
}

std::vector<std::string> Checkpoint::names() const {
  if (gguf_) return gguf_->names();
  std::vector<std::string> names;
  for (size_t s = 0; s < shards_.size(); ++s)
    for (const std::string& name : shards_[s].names()) {
      auto it = shard_of_.find(name);
      if (it != shard_of_.end() && it->second == s) names.push_back(name);
    }
  return names;
}

bool Checkpoint::contains(const std::string& name) const {
  return gguf_ ? gguf_->contains(name) : shard_of_.count(name) > 0;
}

const TensorInfo& Checkpoint::info(const std::string& name) const {
  if (gguf_) {
    auto found = gguf_info_.find(name);
    CPDIT_CHECK(found != gguf_info_.end(), invalid_argument, path_, ": no tensor '", name, "'");
    return found->second;
  }
  auto it = shard_of_.find(name);
  CPDIT_CHECK(it != shard_of_.end(), invalid_argument, path_, ": no tensor '", name, "'");
  return shards_[it->second].info(name);
}

Tensor Checkpoint::get(const std::string& name) const {
  if (gguf_) return gguf_->get(name).values(("reading a dense tensor of " + path_).c_str());
  auto it = shard_of_.find(name);
  CPDIT_CHECK(it != shard_of_.end(), invalid_argument, path_, ": no tensor '", name, "'");
  return shards_[it->second].get(name);
}

Weight Checkpoint::weight(const std::string& name) const {
  if (gguf_) return gguf_->get(name);
  auto it = shard_of_.find(name);
  CPDIT_CHECK(it != shard_of_.end(), invalid_argument, path_, ": no tensor '", name, "'");
  return shards_[it->second].weight(name);
}

}  // namespace cpdit::io
