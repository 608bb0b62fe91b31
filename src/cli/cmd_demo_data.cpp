// `zerotune make-demo-data`: the project's own deterministic dataset for the embedded default job —
// integer-arithmetic prompt/completion pairs written as parquet in the users' layout
// (`prompt`, `completion` large_string columns, like seed_format/sft.parquet).
#include <arrow/api.h>
#include <arrow/io/file.h>
#include <parquet/arrow/writer.h>

#include <CLI/CLI.hpp>
#include <filesystem>
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

int cmd_make_demo_data(const Args& args) {
  CLI::App app{"Write the deterministic integer-arithmetic demo dataset (train + test parquet)"};
  std::string out_dir = "runs/demo_data";
  int64_t train_rows = 4000, test_rows = 200;
  uint64_t seed = 1234;
  app.add_option("--out", out_dir, "output folder (train.parquet, test.parquet)");
  app.add_option("--train-rows", train_rows, "rows in train.parquet");
  app.add_option("--test-rows", test_rows, "rows in test.parquet");
  app.add_option("--seed", seed, "generator seed");
  if (auto rc = parse_command_line(app, kUsage, args)) return *rc;
  if (train_rows <= 0 || test_rows <= 0) fail("make-demo-data: --train-rows and --test-rows must be > 0");
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
