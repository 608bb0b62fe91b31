// The logged history of a training run, read back for `zerotune compare`: zerotune's
// `metrics.jsonl` (one JSON object per log/eval event, metrics.h) or the `log_history` of a
// TRL / transformers `trainer_state.json` (a list of the same objects: {"loss", "grad_norm",
// "learning_rate", "epoch", "step", …} per log, {"eval_loss", …, "step"} per eval, a final
// {"train_runtime", "train_loss", …, "step"}).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/json.h"

namespace zt::train {

struct RunLog {
  std::filesystem::path run;     // what the user named (a run directory or a file)
  std::filesystem::path source;  // the file read
  std::vector<Json> events;      // JSON objects, each with an integer "step", in log order
};

// Reads the log of `run`:
//   - a file: `*.jsonl` is read as metrics.jsonl, anything else as a trainer_state.json;
//   - a directory holding `metrics.jsonl`: that file (zerotune);
//   - otherwise the `trainer_state.json` with a "log_history" in the directory or in any
//     `checkpoint-<step>/` within it, the newest one (largest "global_step"; the directory's own
//     on a tie), as written by transformers' Trainer.
// Python's json writes NaN and ±inf as bare `NaN` / `Infinity` / `-Infinity`; those are read (as
// the strings "NaN", "Infinity", "-Infinity", which metric_value() turns into doubles).
// Throws zt::Error naming the path (and line or log_history index) when `run` does not exist, holds
// no log, is not valid JSON, or an event is not an object with an integer "step".
RunLog read_run_log(const std::filesystem::path& run);

// Parses JSON text that may hold Python's bare NaN / Infinity / -Infinity outside strings (each
// becomes a JSON string of the same text). Throws Json::parse_error on invalid JSON.
Json parse_python_json(std::string_view text);

// The value of a metric field as a double: a number (parsed as a double, so the bits are those the
// writer's shortest round-trip text stands for), null or "NaN" → NaN, "Infinity" / "-Infinity" →
// ±inf. nullopt for anything else (a string, an object, …).
std::optional<double> metric_value(const Json& v);

// The (step, value) points of metric `key`, step ascending: every event holding `key`; when no
// event holds it, the events holding `alias` (if not empty). A step logged twice keeps its last
// value.
// Throws zt::Error naming the source and step when the value is not a number (see metric_value).
std::vector<std::pair<int64_t, double>> metric_series(const RunLog& log, std::string_view key,
                                                      std::string_view alias = {});

}  // namespace zt::train
