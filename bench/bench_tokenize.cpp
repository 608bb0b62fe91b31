// Tokenizer throughput: Tokenizer::encode_batch over the UltraFeedback texts (every row's prompt,
// chosen and rejected), best of --repeat runs after one warm-up run. Driven by run_tokenize.sh,
// which runs HF `tokenizers` on the same texts.
//
//   bench_tokenize --tokenizer PATH --data train_prefs_1000.jsonl [--threads N] [--repeat R]
//
// Prints "load_s=<s>" and "zerotune threads=N texts=T tokens=K bytes=B seconds=S tokens_per_s=X".
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/json.h"
#include "text/tokenizer.h"

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int run(int argc, char** argv) {
  std::string tokenizer_path, data;
  int threads = 1, repeat = 3;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) zt::fail("{} needs a value", a);
      return argv[++i];
    };
    if (a == "--tokenizer") {
      tokenizer_path = value();
    } else if (a == "--data") {
      data = value();
    } else if (a == "--threads") {
      threads = std::stoi(value());
    } else if (a == "--repeat") {
      repeat = std::stoi(value());
    } else {
      zt::fail("unknown argument '{}'", a);
    }
  }
  if (tokenizer_path.empty() || data.empty()) zt::fail("--tokenizer and --data are required");
  std::filesystem::path tp(tokenizer_path);
  if (std::filesystem::is_directory(tp)) tp /= "tokenizer.json";

  std::vector<std::string> texts;
  std::ifstream in(data);
  if (!in) zt::fail("cannot open {}", data);
  std::string line;
  size_t bytes = 0;
  while (std::getline(in, line)) {
    zt::Json row = zt::Json::parse(line);
    for (const char* key : {"prompt", "chosen", "rejected"}) {
      texts.push_back(row[key].get<std::string>());
      bytes += texts.back().size();
    }
  }

  double t0 = now_s();
  auto tok = zt::text::Tokenizer::load(tp);
  fmt::print("load_s={:.3f}\n", now_s() - t0);

  size_t tokens = 0;
  for (const auto& v : tok.encode_batch(texts, threads)) tokens += v.size();  // warm-up
  double best = 1e30;
  for (int r = 0; r < repeat; ++r) {
    double s = now_s();
    auto ids = tok.encode_batch(texts, threads);
    best = std::min(best, now_s() - s);
  }
  fmt::print("zerotune threads={} texts={} tokens={} bytes={} seconds={:.4f} tokens_per_s={:.0f}\n",
             threads, texts.size(), tokens, bytes, best, double(tokens) / best);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_tokenize: {}\n", e.what());
    return 1;
  }
}
