#include "cli/deferred_stdout.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace zt::cli {

DeferredStdout::~DeferredStdout() {
  if (spool_ != nullptr) std::fclose(spool_);
}

void DeferredStdout::append(std::string_view text) {
  buf_ += text;
  if (buf_.size() > kMemoryBytes) spill();
}

// Moves buf_ to the end of the spool file (created, and unlinked at once, on first use).
void DeferredStdout::spill() {
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::temp_directory_path(ec);
  if (ec) {
    const char* env = std::getenv("TMPDIR");
    fail(
        "the output is over {} bytes and is held in a temporary file until every row succeeded, "
        "but there is no usable temporary directory (TMPDIR={}): {}",
        kMemoryBytes, env != nullptr ? fmt::format("'{}'", env) : std::string("unset"),
        ec.message());
  }
  if (spool_ == nullptr) {
    std::string name = (dir / "zerotune-out.XXXXXX").string();
    const int fd = ::mkstemp(name.data());
    if (fd < 0)
      fail("cannot create a temporary file in {} for the output: {}", dir.string(),
           std::strerror(errno));
    ::unlink(name.c_str());
    spool_ = ::fdopen(fd, "w+b");
    if (spool_ == nullptr) {
      const int err = errno;
      ::close(fd);
      fail("cannot open a temporary file in {} for the output: {}", dir.string(),
           std::strerror(err));
    }
  }
  if (std::fwrite(buf_.data(), 1, buf_.size(), spool_) != buf_.size())
    fail("cannot write the output's temporary file in {}: {}", dir.string(), std::strerror(errno));
  buf_.clear();
}

void DeferredStdout::commit() {
  if (spool_ != nullptr) {
    if (std::fflush(spool_) != 0 || std::fseek(spool_, 0, SEEK_SET) != 0)
      fail("cannot read back the output's temporary file: {}", std::strerror(errno));
    std::string chunk(kMemoryBytes, '\0');
    size_t n;
    while ((n = std::fread(chunk.data(), 1, chunk.size(), spool_)) > 0)
      std::fwrite(chunk.data(), 1, n, stdout);
    if (std::ferror(spool_))
      fail("cannot read back the output's temporary file: {}", std::strerror(errno));
    std::fclose(spool_);
    spool_ = nullptr;
  }
  std::fwrite(buf_.data(), 1, buf_.size(), stdout);
  buf_.clear();
  if (std::fflush(stdout) != 0 || std::ferror(stdout))
    fail("cannot write the output to stdout: {}", std::strerror(errno));
}

}  // namespace zt::cli
