#include <cpdit/pipeline/same_across_ranks.hpp>
#include "pipeline/model_digest.hpp"

#include <cpdit/comm/launch.hpp>
#include <cpdit/comm/mpi.hpp>
#include <cpdit/comm/tensor_ops.hpp>
#include <cpdit/core/error.hpp>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string_view>
#include <vector>

namespace cpdit::pipeline {

namespace {

// The processes of this mpirun launch, or nullptr when there is nothing to compare.
std::shared_ptr<comm::Communicator> processes() {
  if (!comm::launched_by_mpi() || !comm::mpi_available()) return nullptr;
  std::shared_ptr<comm::Communicator> world = comm::mpi_world();
  return world->size() > 1 ? world : nullptr;
}

// Every rank's digest; the first rank whose digest is not rank 0's, or 0 when all agree.
int first_rank_differing(comm::Communicator& world, uint64_t mine) {
  std::vector<uint64_t> all(size_t(world.size()));
  world.all_gather(&mine, sizeof mine, all.data());
  for (int rank = 1; rank < world.size(); ++rank)
    if (all[size_t(rank)] != all[0]) return rank;
  return 0;
}

// The file list as it travels: each name, a 0 byte, its 8-byte digest.
std::string encode(const std::vector<FileDigest>& files) {
  std::string bytes;
  for (const FileDigest& f : files) {
    bytes += f.name;
    bytes += '\0';
    bytes.append(reinterpret_cast<const char*>(&f.digest), sizeof f.digest);
  }
  return bytes;
}

std::vector<FileDigest> decode(const std::string& bytes) {
  std::vector<FileDigest> files;
  for (size_t at = 0; at < bytes.size();) {
    FileDigest f;
    f.name = bytes.c_str() + at;
    at += f.name.size() + 1;
    std::memcpy(&f.digest, bytes.data() + at, sizeof f.digest);
    at += sizeof f.digest;
    files.push_back(std::move(f));
  }
  return files;
}

// The first way this rank's files differ from rank 0's, in words.
std::string first_difference(const std::vector<FileDigest>& mine, const std::vector<FileDigest>& root, int rank) {
  const std::string me = "rank " + std::to_string(rank);
  for (size_t i = 0; i < mine.size() || i < root.size(); ++i) {
    if (i == root.size() || (i < mine.size() && mine[i].name < root[i].name))
      return me + " has " + mine[i].name + ", which rank 0 has not";
    if (i == mine.size() || root[i].name < mine[i].name) return me + " has no " + root[i].name + ", which rank 0 has";
    if (mine[i].digest != root[i].digest) return me + "'s " + mine[i].name + " differs from rank 0's";
  }
  return me + "'s model files differ from rank 0's";
}

}  // namespace

void check_same_arguments_across_ranks(int argc, const char* const* argv) {
  const std::shared_ptr<comm::Communicator> world = processes();
  if (!world) return;
  // Each argument followed by a 0 byte, so that ("ab", "c") and ("a", "bc") differ.
  Fnv1a hash;
  for (int i = 1; i < argc; ++i) {
    hash.add(argv[i]);
    hash.add(std::string_view("", 1));
  }
  const int rank = first_rank_differing(*world, hash.value);
  CPDIT_CHECK(rank == 0, invalid_argument, "the MPI processes were launched with different arguments (rank ", rank,
              "'s differ from rank 0's); give every process the same command line");
}

void check_same_model_across_ranks(const std::vector<std::string>& paths) {
  const std::shared_ptr<comm::Communicator> world = processes();
  if (!world) return;
  const std::vector<FileDigest> files = model_file_digests(paths);
  const std::string mine = encode(files);
  Fnv1a hash;
  hash.add(mine);
  const int rank = first_rank_differing(*world, hash.value);
  if (rank == 0) return;
  // Rank 0's list to every rank; the first differing rank says how its files differ, to all.
  std::string root = mine;
  comm::broadcast_bytes(*world, root, 0);
  std::string difference = world->rank() == rank ? first_difference(files, decode(root), rank) : std::string();
  comm::broadcast_bytes(*world, difference, rank);
  fail(ErrorKind::invalid_argument, "the MPI processes' models differ: ", difference,
       "; give every process the same model files");
}

uint64_t random_seed_across_ranks() {
  std::random_device entropy;
  // Below 2^53, so that a JSON reader of the summary (a double) gets the seed back exactly.
  uint64_t seed = ((uint64_t(entropy()) << 32) | entropy()) & ((uint64_t(1) << 53) - 1);
  if (auto world = processes()) world->broadcast(&seed, sizeof seed, 0);
  return seed;
}

}  // namespace cpdit::pipeline
