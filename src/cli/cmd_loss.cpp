// `zerotune loss --model DIR FILE [--grad-norms] [--dtype fp32|bf16] [--checkpointing]`:
// runs the rows of a JSONL file as one padding-free micro-batch through the model of an HF
// directory on the CPU and prints one JSON object:
//   {"examples", "tokens", "targets", "loss_sum", "mean_loss", "correct"
//    [, "grad_norms": {hf name: ||d mean_loss / d param||₂, …}, "total_grad_norm"]}
// Rows are {"input_ids": [...], "labels": [...]} with HF's unshifted labels (the loss at position
// t uses labels[t+1]; -100 = not trained); "labels" defaults to input_ids. The mean loss is
// loss_sum / targets, the quantity HF's ForCausalLMLoss returns with num_items_in_batch = targets.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "cli/command_line.h"
#include "cli/commands.h"
#include "core/arena.h"
#include "core/error.h"
#include "io/json.h"
#include "io/json_check.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "io/tied_embeddings.h"
#include "model/causal_lm.h"

namespace zt::cli {
namespace {

// Reads an int array field of one JSONL row; zt::Error names file, line and key.
std::vector<int32_t> int_array(const Json& row, const char* key, const std::string& file,
                               int64_t line) {
  const Json& a = row.at(key);
  if (!a.is_array()) fail("{}:{}: \"{}\" is not an array of integers", file, line, key);
  std::vector<int32_t> out;
  out.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].is_number_integer())
      fail("{}:{}: \"{}\"[{}] is {}, expected an integer", file, line, key, i, a[i].dump());
    // A number above INT64_MAX is held unsigned: as int64 it would wrap (2^64 - 100 to -100).
    const bool fits = a[i].is_number_unsigned()
                          ? a[i].get<uint64_t>() <= static_cast<uint64_t>(INT32_MAX)
                          : a[i].get<int64_t>() >= INT32_MIN && a[i].get<int64_t>() <= INT32_MAX;
    if (!fits)
      fail("{}:{}: \"{}\"[{}] = {} does not fit in 32 bits", file, line, key, i, a[i].dump());
    out.push_back(static_cast<int32_t>(a[i].get<int64_t>()));
  }
  return out;
}

// A row's optional `attention_mask` / `position_ids`, which transformers' forward would apply:
// zerotune runs each row as one unpadded sequence, so only their defaults — all ones, 0 … n-1 —
// mean the same. Throws zt::Error naming the file, line and key for anything else (it was ignored).
void check_defaults_only(const Json& row, size_t n, const std::string& file, int64_t line) {
  for (const char* key : {"attention_mask", "position_ids"}) {
    if (!row.contains(key)) continue;
    const std::vector<int32_t> v = int_array(row, key, file, line);
    const bool mask = std::string_view(key) == "attention_mask";
    bool same = v.size() == n;
    for (size_t i = 0; same && i < n; ++i) same = v[i] == (mask ? 1 : static_cast<int32_t>(i));
    if (!same)
      fail(
          "{}:{}: \"{}\" is not {}; zerotune loss runs each row as one unpadded sequence (put "
          "only its real tokens in input_ids)",
          file, line, key, mask ? "all ones" : "0, 1, … in order");
  }
}

// Every id of `ids` in [0, vocab) and every label in [0, vocab) or -100; throws zt::Error naming
// the file, the line, the key and the index of the first one that is not.
void check_vocab(const std::vector<int32_t>& ids, const std::vector<int32_t>& labels, int64_t vocab,
                 const std::string& file, int64_t line) {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab)
      fail("{}:{}: \"input_ids\"[{}] = {} is outside the model's vocabulary [0, {})", file, line, i,
           ids[i], vocab);
  for (size_t i = 0; i < labels.size(); ++i)
    if (labels[i] != -100 && (labels[i] < 0 || labels[i] >= vocab))
      fail("{}:{}: \"labels\"[{}] = {} is outside [0, {}) and not -100", file, line, i, labels[i],
           vocab);
}

// Reads the rows of `file` into one packed batch, checking each against the model's vocabulary
// size `vocab`. Throws zt::Error naming the file and line of a bad row.
PackedBatch read_jsonl(const std::string& file, int64_t vocab) {
  if (std::filesystem::is_directory(file)) fail("{}: is a directory; expected a JSONL file", file);
  std::ifstream in(file);
  if (!in) fail("{}: cannot open", file);
  PackedBatch batch;
  std::string text;
  int64_t line = 0;
  while (std::getline(in, text)) {
    ++line;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    Json row;
    check_json_text(text, file, static_cast<size_t>(line));
    try {
      row = Json::parse(text);
    } catch (const Json::exception& e) {
      fail("{}:{}: invalid JSON: {}", file, line, json_error_reason(e));
    }
    if (!row.is_object() || !row.contains("input_ids"))
      fail("{}:{}: expected an object with \"input_ids\"", file, line);
    const std::vector<int32_t> ids = int_array(row, "input_ids", file, line);
    const std::vector<int32_t> labels =
        row.contains("labels") ? int_array(row, "labels", file, line) : ids;
    if (ids.empty()) fail("{}:{}: \"input_ids\" is empty", file, line);
    if (labels.size() != ids.size())
      fail("{}:{}: {} input_ids but {} labels", file, line, ids.size(), labels.size());
    check_defaults_only(row, ids.size(), file, line);
    check_vocab(ids, labels, vocab, file, line);
    batch.add(ids, labels);
  }
  if (in.bad()) fail("{}: read error after line {}", file, line);
  if (batch.tokens.empty()) fail("{}: no rows", file);
  return batch;
}

}  // namespace

constexpr CommandUsage kUsage{
    "loss", "--model DIR FILE.jsonl [--grad-norms] [--dtype fp32|bf16] [--checkpointing]"};

int cmd_loss(const Args& args) {
  CLI::App app{"Loss (and gradient norms) of a JSONL file run as one micro-batch"};
  std::string model_dir, file, dtype = "fp32";
  bool grad_norms = false, checkpointing = false;
  app.add_option("--model", model_dir, "HF model directory (config.json + safetensors)")
      ->required();
  app.add_option("file", file, "JSONL rows {\"input_ids\": [...], \"labels\": [...]}")->required();
  app.add_flag("--grad-norms", grad_norms, "also print the L2 norm of every parameter's gradient");
  app.add_option("--dtype", dtype, "compute dtype: fp32 or bf16 (bf16-storage)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_flag("--checkpointing", checkpointing, "per-layer activation checkpointing");
  if (auto rc = parse_command_line(app, kUsage, args)) return *rc;
  ModelConfig cfg = load_model_config(model_dir);
  const PackedBatch batch = read_jsonl(file, cfg.vocab_size);
  const MicroBatch mb = batch.view();
  const SafetensorsReader weights(model_dir);
  reconcile_tied_embeddings(cfg, weights);
  CpuOps ops;
  HostMemory memory;
  ModelOptions opt;
  opt.dtype = dtype == "bf16" ? DType::kBF16 : DType::kF32;
  opt.max_tokens = mb.num_tokens();
  opt.max_seqlen = batch.max_seqlen();
  opt.checkpointing = checkpointing;
  CausalLM model(cfg, ops, memory, opt);
  model.load_weights(weights);
  const int64_t n = count_targets(mb);
  CeStats st;
  if (grad_norms) {
    BackwardOptions bo;
    bo.grad_scale = n > 0 ? static_cast<float>(1.0 / static_cast<double>(n)) : 0.0f;
    st = model.forward_backward(mb, bo);
  } else {
    st = model.forward(mb);
  }
  Json out = Json::object();
  out["examples"] = mb.num_seqs();
  out["tokens"] = mb.num_tokens();
  out["targets"] = st.count;
  out["loss_sum"] = st.loss_sum;
  out["mean_loss"] = st.count > 0 ? st.loss_sum / static_cast<double>(st.count) : 0.0;
  out["correct"] = st.correct;
  if (grad_norms) {
    Json norms = Json::object();
    double total = 0.0;
    std::vector<std::byte> ws;
    for (int i = 0; i < model.layout().num_params(); ++i) {
      const Tensor g = model.grad(i);
      ws.resize(std::max<size_t>(1, ops.sumsq_workspace_bytes(g)));
      double sq = 0.0;
      ops.sumsq(&sq, g, Tensor(ws.data(), DType::kU8, {static_cast<int64_t>(ws.size())}), {});
      norms[model.layout().param(i).name] = std::sqrt(sq);
      total += sq;
    }
    out["grad_norms"] = std::move(norms);
    out["total_grad_norm"] = std::sqrt(total);
  }
  fmt::print("{}\n", out.dump());
  return 0;
}

}  // namespace zt::cli
