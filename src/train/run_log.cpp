#include "train/run_log.h"

#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "core/error.h"
#include "core/file_util.h"
#include "io/json_check.h"
#include "train/checkpoint_dirs.h"

namespace zt::train {

namespace fs = std::filesystem;

namespace {

// An event must be an object with an integer "step"; `where` names it in the error.
void check_event(const Json& e, const std::string& where) {
  if (!e.is_object() || !e.contains("step") || !e["step"].is_number_integer())
    fail("{}: expected a JSON object with an integer \"step\", got: {}", where,
         e.dump().substr(0, 200));
}

RunLog read_metrics_jsonl(const fs::path& run, const fs::path& file) {
  RunLog log{run, file, {}};
  std::istringstream in(read_file(file));
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Json e;
    check_json_text(line, file.string(), static_cast<size_t>(line_no));
    try {
      e = parse_python_json(line);
    } catch (const Json::exception& x) {
      fail("{}:{}: not valid JSON: {}", file.string(), line_no, json_error_reason(x));
    }
    check_event(e, fmt::format("{}:{}", file.string(), line_no));
    log.events.push_back(std::move(e));
  }
  return log;
}

Json read_trainer_state(const fs::path& file) {
  try {
    const std::string text = read_file(file);
    check_json_text(text, file.string());
    return parse_python_json(text);
  } catch (const Json::exception& x) {
    fail("{}: not valid JSON: {}", file.string(), json_error_reason(x));
  }
}

RunLog log_history_of(const fs::path& run, const fs::path& file, const Json& state) {
  if (!state.is_object() || !state.contains("log_history") || !state["log_history"].is_array())
    fail("{}: no \"log_history\" list (not a transformers trainer_state.json with a log)",
         file.string());
  RunLog log{run, file, {}};
  size_t i = 0;
  for (const Json& e : state["log_history"]) {
    check_event(e, fmt::format("{}: log_history[{}]", file.string(), i++));
    log.events.push_back(e);
  }
  return log;
}

}  // namespace

Json parse_python_json(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) {
        out += text[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
      continue;
    }
    bool replaced = false;
    for (std::string_view word : {"NaN", "Infinity", "-Infinity"}) {
      if (text.substr(i, word.size()) == word) {
        out += '"';
        out += word;
        out += '"';
        i += word.size() - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += c;
  }
  return Json::parse(out);
}

std::optional<double> metric_value(const Json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_null()) return std::numeric_limits<double>::quiet_NaN();
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (s == "Infinity") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
  }
  return std::nullopt;
}

RunLog read_run_log(const fs::path& run) {
  std::error_code ec;
  if (!fs::exists(run, ec)) fail("{}: no such run directory or file", run.string());
  if (fs::is_regular_file(run, ec)) {
    if (run.extension() == ".jsonl") return read_metrics_jsonl(run, run);
    return log_history_of(run, run, read_trainer_state(run));
  }
  if (fs::is_regular_file(run / "metrics.jsonl", ec))
    return read_metrics_jsonl(run, run / "metrics.jsonl");
  // transformers: the run directory's own trainer_state.json (Trainer.save_state) and each
  // checkpoint's; the newest wins.
  std::vector<fs::path> candidates;
  if (fs::is_regular_file(run / "trainer_state.json", ec))
    candidates.push_back(run / "trainer_state.json");
  for (const auto& c : list_checkpoints(run))
    if (fs::is_regular_file(c.path / "trainer_state.json", ec))
      candidates.push_back(c.path / "trainer_state.json");
  std::optional<RunLog> best;
  int64_t best_step = -1;
  for (const auto& file : candidates) {
    const Json state = read_trainer_state(file);
    if (!state.is_object() || !state.contains("log_history"))
      continue;  // e.g. a checkpoint of a zerotune before zerotune_state.json
    const int64_t step = state.contains("global_step") && state["global_step"].is_number_integer()
                             ? state["global_step"].get<int64_t>()
                             : 0;
    if (step > best_step) {
      best = log_history_of(run, file, state);
      best_step = step;
    }
  }
  if (!best)
    fail(
        "{}: no run log found: no metrics.jsonl (zerotune) and no trainer_state.json with a "
        "\"log_history\" (transformers / TRL) in it or in its checkpoint-*/ directories",
        run.string());
  return *best;
}

std::vector<std::pair<int64_t, double>> metric_series(const RunLog& log, std::string_view key,
                                                      std::string_view alias) {
  std::string k(key);
  bool any = false;
  for (const Json& e : log.events) any = any || e.contains(k);
  if (!any && !alias.empty()) k = std::string(alias);
  std::map<int64_t, double> points;
  for (const Json& e : log.events) {
    if (!e.contains(k)) continue;
    const int64_t step = e["step"].get<int64_t>();
    const auto v = metric_value(e[k]);
    if (!v)
      fail("{}: step {}: \"{}\" is {}, not a number", log.source.string(), step, k, e[k].dump());
    points[step] = *v;
  }
  return {points.begin(), points.end()};
}

}  // namespace zt::train
