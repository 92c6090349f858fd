// Reading small files without iostreams: every byte of a file larger than one
// read, the byte limit, missing and empty files, and the first word past
// leading whitespace.
#include "fabric/small_file.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>

namespace tide::fabric {
namespace {

class TempFile {
 public:
  explicit TempFile(const std::string& contents) {
    char name[] = "/tmp/tide_small_file_XXXXXX";
    const int fd = ::mkstemp(name);
    if (fd < 0) throw std::runtime_error("mkstemp failed");
    path_ = name;
    size_t at = 0;
    while (at < contents.size()) {
      const ssize_t put = ::write(fd, contents.data() + at, contents.size() - at);
      if (put <= 0) break;
      at += static_cast<size_t>(put);
    }
    ::close(fd);
  }
  ~TempFile() { ::unlink(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string randomBytes(size_t n) {
  std::mt19937_64 rng(std::random_device{}());
  std::string out(n, '\0');
  for (char& c : out) c = static_cast<char>(rng());
  return out;
}

TEST(ReadSmallFile, EveryByteOfAFileLargerThanOneRead) {
  const std::string bytes = randomBytes(10'000);
  const TempFile file(bytes);
  const std::optional<std::string> got = readSmallFile(file.path());
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, bytes);
}

TEST(ReadSmallFile, StopsAtTheLimit) {
  const std::string bytes = randomBytes(9'000);
  const TempFile file(bytes);
  for (const size_t limit : {size_t{0}, size_t{1}, size_t{4096}, size_t{5000}, size_t{9000}, size_t{20000}}) {
    const std::optional<std::string> got = readSmallFile(file.path(), limit);
    ASSERT_TRUE(got.has_value()) << limit;
    EXPECT_EQ(*got, bytes.substr(0, limit)) << limit;
  }
}

TEST(ReadSmallFile, MissingFileAndProcFiles) {
  EXPECT_FALSE(readSmallFile("/nonexistent/tide/file").has_value());
  // /proc files report size 0; they must still be read to their end.
  const std::optional<std::string> stat = readSmallFile("/proc/self/stat");
  ASSERT_TRUE(stat.has_value());
  EXPECT_EQ(stat->substr(0, stat->find(' ')), std::to_string(::getpid()));
}

TEST(FirstWordOfFile, SkipsLeadingWhitespaceAndStopsAtTheNext) {
  const TempFile word(" \n\t 12345abc  rest\n");
  EXPECT_EQ(firstWordOfFile(word.path()), std::optional<std::string>("12345abc"));
  const TempFile last("max");
  EXPECT_EQ(firstWordOfFile(last.path()), std::optional<std::string>("max"));
  const TempFile blank(" \n\t ");
  EXPECT_FALSE(firstWordOfFile(blank.path()).has_value());
  const TempFile empty("");
  EXPECT_FALSE(firstWordOfFile(empty.path()).has_value());
  EXPECT_FALSE(firstWordOfFile("/nonexistent/tide/file").has_value());
}

}  // namespace
}  // namespace tide::fabric
