// Output of a command that must print all of it or nothing (render, tokenize): an error in a late
// row must not leave the earlier rows on stdout.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

namespace zt::cli {

// Collects a command's output and writes it to stdout only at commit(). Up to kMemoryBytes stay in
// memory; beyond that the output is spooled to an unlinked temporary file in
// std::filesystem::temp_directory_path() ($TMPDIR, else /tmp), so memory stays bounded however
// large the input. Destroyed without commit() (an error was thrown): nothing is printed and the
// temporary file goes with the descriptor. append/commit throw zt::Error naming the temporary
// directory and the errno text when the spool file cannot be created, written or read back.
class DeferredStdout {
 public:
  static constexpr size_t kMemoryBytes = size_t{1} << 20;  // 1 MiB, the old print chunk

  DeferredStdout() = default;
  ~DeferredStdout();
  DeferredStdout(const DeferredStdout&) = delete;
  DeferredStdout& operator=(const DeferredStdout&) = delete;

  void append(std::string_view text);
  // Writes everything appended, in order, to stdout and flushes it.
  void commit();

 private:
  void spill();
  std::string buf_;
  std::FILE* spool_ = nullptr;
};

}  // namespace zt::cli
