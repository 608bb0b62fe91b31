// `zerotune make-demo-data`: the project's own deterministic dataset for the embedded default job —
// integer-arithmetic prompt/completion pairs written as parquet in the users' layout
// (`prompt`, `completion` large_string columns, like seed_format/sft.parquet).
#include <arrow/api.h>
#include <arrow/io/file.h>
#include <parquet/arrow/writer.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/run_dir_guard.h"
#include "core/error.h"

namespace zt::cli {
namespace {

// splitmix64: a tiny, well-known 64-bit generator; enough for reproducible toy data.
struct SplitMix64 {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  int64_t uniform(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1)); }
};

void check(const arrow::Status& st, const std::filesystem::path& p) {
  if (!st.ok()) fail("{}: writing parquet failed: {}", p.string(), st.ToString());
}

}  // namespace

void write_arithmetic_parquet(const std::filesystem::path& path, int64_t rows, uint64_t seed) {
  SplitMix64 rng{seed};
  arrow::LargeStringBuilder prompts, completions;
  static const char* kOps[] = {"+", "-", "*"};
  for (int64_t i = 0; i < rows; ++i) {
    int op = static_cast<int>(rng.uniform(0, 2));
    int64_t a = rng.uniform(0, op == 2 ? 99 : 999), b = rng.uniform(0, op == 2 ? 99 : 999);
    int64_t r = op == 0 ? a + b : op == 1 ? a - b : a * b;
    std::string prompt = fmt::format("What is {} {} {}?", a, kOps[op], b);
    std::string completion = fmt::format("{} {} {} = {}", a, kOps[op], b, r);
    check(prompts.Append(prompt), path);
    check(completions.Append(completion), path);
  }
  std::shared_ptr<arrow::Array> pa, ca;
  check(prompts.Finish(&pa), path);
  check(completions.Finish(&ca), path);
  auto schema = arrow::schema({arrow::field("prompt", arrow::large_utf8()), arrow::field("completion", arrow::large_utf8())});
  auto table = arrow::Table::Make(schema, {pa, ca});
  auto tmp = path;
  tmp += ".tmp";
  auto out = arrow::io::FileOutputStream::Open(tmp.string());
  if (!out.ok()) fail("{}: cannot open for writing: {}", tmp.string(), out.status().ToString());
  auto arrow_props = parquet::ArrowWriterProperties::Builder().store_schema()->build();
  check(parquet::arrow::WriteTable(*table, arrow::default_memory_pool(), *out, 1 << 20,
                                   parquet::default_writer_properties(), arrow_props),
        path);
  check((*out)->Close(), path);
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    const std::string why = ec.message();
    std::filesystem::remove(tmp, ec);
    fail("{}: cannot move {} into place: {}", path.string(), tmp.filename().string(), why);
  }
}

constexpr CommandUsage kUsage{"make-demo-data",
                              "[--out DIR] [--train-rows N] [--test-rows N] [--seed S]"};

// The most rows of either file, a sane bound for a demo set: the table is built whole in memory
// before it is written (at the limit ~0.9 GB peak RSS, a 395 MB train.parquet, ~5 s on one core);
// a typo like 10^12 is refused before anything is allocated.
constexpr int64_t kMaxDemoRows = 10'000'000;

namespace {

// Command-line argument `name` = `text` as a decimal integer in [lo, hi]. Parsed here, not by
// CLI11, which reads "--seed -1" as 18446744073709551615 and saturates a row count past int64.
// Throws zt::Error naming the argument, the text and the accepted range.
template <typename T>
T parse_in_range(const char* name, const std::string& text, T lo, T hi, const char* what) {
  T v{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end || v < lo || v > hi)
    fail("make-demo-data: {} '{}': expected {} from {} to {}", name, text, what, lo, hi);
  return v;
}

}  // namespace

int cmd_make_demo_data(const Args& args) {
  CLI::App app{"Write the deterministic integer-arithmetic demo dataset (train + test parquet)"};
  std::string out_dir = "runs/demo_data";
  std::string train_text = "4000", test_text = "200", seed_text = "1234";
  app.add_option("--out", out_dir, "output folder (train.parquet, test.parquet)");
  app.add_option("--train-rows", train_text, "rows in train.parquet (1 to 10000000)")
      ->type_name("N");
  app.add_option("--test-rows", test_text, "rows in test.parquet (1 to 10000000)")->type_name("N");
  app.add_option("--seed", seed_text, "generator seed (0 to 18446744073709551615)")->type_name("S");
  if (auto rc = parse_command_line(app, kUsage, args)) return *rc;
  const auto train_rows =
      parse_in_range<int64_t>("--train-rows", train_text, 1, kMaxDemoRows, "a row count");
  const auto test_rows =
      parse_in_range<int64_t>("--test-rows", test_text, 1, kMaxDemoRows, "a row count");
  const auto seed = parse_in_range<uint64_t>("--seed", seed_text, 0,
                                             std::numeric_limits<uint64_t>::max(), "an integer");
  if (out_dir.empty()) fail("make-demo-data: --out is empty; expected a folder");
  // The folder is checked and made here, so that a file or an unwritable place in its path is a
  // message naming --out, not a std::filesystem exception.
  check_dir_creatable("make-demo-data", "--out", out_dir);
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) fail("make-demo-data: --out: cannot create {}: {}", out_dir, ec.message());
  write_arithmetic_parquet(std::filesystem::path(out_dir) / "train.parquet", train_rows, seed);
  write_arithmetic_parquet(std::filesystem::path(out_dir) / "test.parquet", test_rows, seed + 1);
  fmt::print("wrote {}/train.parquet ({} rows) and {}/test.parquet ({} rows)\n", out_dir, train_rows, out_dir, test_rows);
  return 0;
}

}  // namespace zt::cli
