// A failed write leaves the old file as it was and no temp file behind.
#include "io_test_util.hpp"

#include <cpdit/io/atomic_file.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/io/safetensors.hpp>

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/stat.h>

#include <csignal>
#include <unistd.h>

using namespace cpdit;
using namespace cpdit::io;
using namespace cpdit::io::test;

TEST(AtomicWrite, ReplacesTheFileWhenComplete) {
  TempDir dir;
  write_text_atomic(dir.file("a.txt"), "old");
  write_text_atomic(dir.file("a.txt"), "new");
  EXPECT_EQ(read_bytes(dir.file("a.txt")), "new");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.txt"});
}

TEST(AtomicWrite, AbandonedWriteLeavesOldFileAndNoTemp) {
  TempDir dir;
  write_text_atomic(dir.file("a.txt"), "old");
  try {
    AtomicFile file(dir.file("a.txt"));
    file.write("partial", 7);
    EXPECT_TRUE(std::filesystem::exists(file.temp_path()));
    throw std::runtime_error("writer failed half way");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(read_bytes(dir.file("a.txt")), "old");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.txt"});
}

TEST(AtomicWrite, SaveWithAThrowingTensorKeepsTheOldFile) {
  TempDir dir;
  std::map<std::string, Tensor> good = {{"x", Tensor::full({3}, 2.0)}};
  save_safetensors(dir.file("w.safetensors"), good);
  std::string before = read_bytes(dir.file("w.safetensors"));
  // An undefined tensor makes save_safetensors throw.
  EXPECT_THROW(save_safetensors(dir.file("w.safetensors"), {{"x", Tensor::full({3}, 5.0)}, {"y", Tensor()}}), Error);
  EXPECT_EQ(read_bytes(dir.file("w.safetensors")), before);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"w.safetensors"});
}

TEST(AtomicWrite, WriteFailingHalfWayKeepsTheOldFile) {
  // A file-size limit makes write() fail with EFBIG part way through the data (even for root).
  TempDir dir;
  save_safetensors(dir.file("w.safetensors"), {{"x", Tensor::full({2}, 1.0)}});
  std::string before = read_bytes(dir.file("w.safetensors"));
  rlimit saved;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto previous_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  try {
    save_safetensors(dir.file("w.safetensors"), {{"x", Tensor::full({100000}, 2.0)}});
    ADD_FAILURE() << "a write past the file-size limit succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("writing"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("w.safetensors"), std::string::npos) << e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, previous_handler);
  EXPECT_EQ(read_bytes(dir.file("w.safetensors")), before);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"w.safetensors"});
}

TEST(AtomicWrite, MissingFolderIsAClearError) {
  TempDir dir;
  expect_error([&] { save_safetensors(dir.file("no/such/dir/w.safetensors"), {{"x", Tensor::full({1}, 1.0)}}); },
               {"cannot write", "no/such/dir/w.safetensors", "No such file"});
  EXPECT_TRUE(dir.entries().empty());
}

TEST(AtomicWrite, ReadOnlyFolderIsAClearErrorAndKeepsTheOldFile) {
  TempDir dir;
  write_text_atomic(dir.file("keep.txt"), "old");
  // Root ignores folder permissions, so the write is tried by a child that first becomes `nobody`,
  // who owns the folder: without the chmod below it could write there, so only the read-only mode
  // makes the write fail. Exit codes: 0 the expected error, 1 the write succeeded, 2 another error,
  // 3 could not drop root.
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(dir.path().c_str(), 65534, 65534), 0);
  }
  ASSERT_EQ(::chmod(dir.path().c_str(), 0555), 0);
  EXPECT_EXIT(
      {
        if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) std::_Exit(3);
        try {
          write_text_atomic(dir.file("keep.txt"), "new");
          std::_Exit(1);
        } catch (const Error& e) {
          const std::string what = e.what();
          std::_Exit(what.find("cannot write") != std::string::npos && what.find("keep.txt") != std::string::npos ? 0
                                                                                                                  : 2);
        }
      },
      ::testing::ExitedWithCode(0), "");
  ::chmod(dir.path().c_str(), 0755);
  EXPECT_EQ(read_bytes(dir.file("keep.txt")), "old");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"keep.txt"});
}

TEST(AtomicWrite, RenameOntoAFolderFailsAndCleansUp) {
  TempDir dir;
  std::filesystem::create_directory(dir.file("target"));
  expect_error([&] { write_text_atomic(dir.file("target"), "x"); }, {"cannot replace", "target"});
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"target"});
}

// Interrupted between creating its temp file and renaming it, a write leaves nothing behind, and the
// process still ends by the signal (the previous disposition runs after the clean-up).
TEST(AtomicWriteDeathTest, InterruptionRemovesTheTempFile) {
  for (int signal : {SIGINT, SIGTERM}) {
    TempDir dir;
    const std::string path = dir.file("w.safetensors");
    EXPECT_EXIT(
        {
          AtomicFile file(path);
          file.write("partial", 7);
          std::raise(signal);
        },
        ::testing::KilledBySignal(signal), "");
    EXPECT_TRUE(dir.entries().empty()) << "signal " << signal << " left " << dir.entries().size() << " files";
  }
}
