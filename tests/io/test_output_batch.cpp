// Outputs written in an OutputBatch appear together or not at all: a failure while writing a later
// one, or a target that cannot be replaced, leaves every old output as it was and no temp file.
#include "io_test_util.hpp"

#include <cpdit/io/atomic_file.hpp>
#include <cpdit/io/png.hpp>
#include <cpdit/io/safetensors.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <stdexcept>

using namespace cpdit;
using namespace cpdit::io;
using namespace cpdit::io::test;

namespace {

void write_text(const std::string& path, const std::string& text) {
  AtomicFile file(path);
  file.write(text.data(), text.size());
  file.commit();
}

std::vector<std::string> sorted(std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST(OutputBatch, NothingAppearsBeforeCommitThenEverything) {
  TempDir dir;
  write_text(dir.file("a.txt"), "old a");
  {
    OutputBatch batch;
    write_text(dir.file("a.txt"), "new a");
    save_safetensors(dir.file("b.safetensors"), {{"x", Tensor::full({2}, 1.0)}});
    EXPECT_EQ(read_bytes(dir.file("a.txt")), "old a");
    EXPECT_FALSE(std::filesystem::exists(dir.file("b.safetensors")));
    batch.commit();
  }
  EXPECT_EQ(read_bytes(dir.file("a.txt")), "new a");
  EXPECT_EQ(load_safetensors(dir.file("b.safetensors")).size(), 1u);
  EXPECT_EQ(sorted(dir.entries()), (std::vector<std::string>{"a.txt", "b.safetensors"}));
  // The batch is closed: a later write lands at once.
  write_text(dir.file("a.txt"), "after");
  EXPECT_EQ(read_bytes(dir.file("a.txt")), "after");
}

TEST(OutputBatch, ALaterFailureKeepsEveryOldOutputAndNoTemp) {
  TempDir dir;
  write_text(dir.file("a.txt"), "old a");
  try {
    OutputBatch batch;
    write_text(dir.file("a.txt"), "new a");
    // An undefined tensor makes save_safetensors throw after a.txt was staged.
    save_safetensors(dir.file("b.safetensors"), {{"y", Tensor()}});
    batch.commit();
    ADD_FAILURE() << "the failing write did not throw";
  } catch (const Error&) {
  }
  EXPECT_EQ(read_bytes(dir.file("a.txt")), "old a");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.txt"});
}

// A folder where a file should go is found before the first rename: the other output stays old.
TEST(OutputBatch, AFolderTargetRefusesTheWholeBatch) {
  TempDir dir;
  write_text(dir.file("a.txt"), "old a");
  std::filesystem::create_directory(dir.file("picture.png"));
  expect_error(
      [&] {
        OutputBatch batch;
        write_text(dir.file("a.txt"), "new a");
        write_png(dir.file("picture.png"), std::vector<uint8_t>(2 * 2 * 3, 7), 2, 2);
        batch.commit();
      },
      {"cannot replace", "picture.png", "folder", "no output was written"});
  EXPECT_EQ(read_bytes(dir.file("a.txt")), "old a");
  EXPECT_EQ(sorted(dir.entries()), (std::vector<std::string>{"a.txt", "picture.png"}));
}

TEST(OutputBatch, TheLastWriteOfAPathWins) {
  TempDir dir;
  OutputBatch batch;
  write_text(dir.file("a.txt"), "first");
  write_text(dir.file("a.txt"), "second");
  batch.commit();
  EXPECT_EQ(read_bytes(dir.file("a.txt")), "second");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.txt"});
}

// Interrupted before its commit, a batch leaves none of its temp files, however many it holds (80:
// more than the 64 the clean-up list once held, few enough that their fsyncs take about a second).
TEST(OutputBatchDeathTest, InterruptionRemovesEveryStagedFile) {
  TempDir dir;
  EXPECT_EXIT(
      {
        OutputBatch batch;
        for (int i = 0; i < 80; ++i) write_text(dir.file("frame_" + std::to_string(i) + ".png"), "pixels");
        std::raise(SIGINT);
      },
      ::testing::KilledBySignal(SIGINT), "");
  EXPECT_TRUE(dir.entries().empty()) << dir.entries().size() << " files left";
}
