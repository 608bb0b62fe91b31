#include "train/metrics.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <sstream>
#include <string_view>

#include "core/error.h"
#include "core/file_util.h"
#include "io/json_check.h"

namespace zt::train {

namespace {

double as_double(const MetricValue& v) {
  return std::holds_alternative<int64_t>(v) ? static_cast<double>(std::get<int64_t>(v))
                                            : std::get<double>(v);
}

}  // namespace

void MetricRecord::set(std::string_view key, MetricValue value) {
  for (auto& [k, v] : fields_) {
    if (k == key) {
      v = value;
      return;
    }
  }
  fields_.emplace_back(std::string(key), value);
}

const MetricValue* MetricRecord::find(std::string_view key) const {
  for (const auto& [k, v] : fields_)
    if (k == key) return &v;
  return nullptr;
}

double MetricRecord::number(std::string_view key) const {
  const MetricValue* v = find(key);
  if (!v) fail("metric record has no key '{}'", key);
  return as_double(*v);
}

Json MetricRecord::to_json() const {
  Json j = Json::object();
  for (const auto& [k, v] : fields_) {
    if (std::holds_alternative<int64_t>(v)) {
      j[k] = std::get<int64_t>(v);
    } else {
      const double d = std::get<double>(v);
      j[k] = std::isfinite(d) ? Json(d) : Json(nullptr);
    }
  }
  return j;
}

std::string format_g4(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  // C's %.4g and Python's .4g agree for finite values: correctly rounded, the same exponent
  // switch (exp < -4 or >= 4), trailing zeros removed, at least two exponent digits.
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

double python_round(double x, int ndigits) {
  if (ndigits < 0 || ndigits > 17)
    fail("python_round: ndigits must be in [0, 17], got {}", ndigits);
  if (!std::isfinite(x)) return x;
  // glibc's %.Nf is correctly rounded from the exact binary value, ties to even (the default
  // rounding mode), as Python's round() (dtoa mode 3); strtod reads the decimal back as round()
  // does. 309 integer digits at most for a double.
  char buf[400];
  std::snprintf(buf, sizeof buf, "%.*f", ndigits, x);
  return std::strtod(buf, nullptr);
}

void add_speed_metrics(MetricRecord& r, std::string_view split, double runtime_seconds,
                       double num_samples, double num_steps) {
  if (!std::isfinite(runtime_seconds) || runtime_seconds < 0)
    fail("{}_runtime: expected a finite number of seconds >= 0, got {}", split, runtime_seconds);
  if (!(num_samples >= 0) || !(num_steps >= 0))
    fail("{} speed metrics: expected sample and step counts >= 0, got {} and {}", split,
         num_samples, num_steps);
  const std::string s(split);
  r.set(s + "_runtime", python_round(runtime_seconds, 4));
  if (runtime_seconds == 0) return;
  r.set(s + "_samples_per_second", python_round(num_samples / runtime_seconds, 3));
  r.set(s + "_steps_per_second", python_round(num_steps / runtime_seconds, 3));
}

std::string hf_log_line(const MetricRecord& record) {
  // Formatted in place: gcc 12 took the inlined `"'" + str + "'"` temporaries for overlapping
  // copies (a -Wrestrict false positive).
  std::string out = "{";
  auto to = std::back_inserter(out);
  std::string_view sep;
  for (const auto& [k, v] : record.fields()) {
    if (k == "step" || k == "total_flos") continue;
    if (std::holds_alternative<int64_t>(v))
      fmt::format_to(to, "{}'{}': {}", sep, k, std::get<int64_t>(v));
    else
      fmt::format_to(to, "{}'{}': '{}'", sep, k, format_g4(std::get<double>(v)));
    sep = ", ";
  }
  out += '}';
  return out;
}

std::string hf_tensorboard_tag(std::string_view key) {
  if (key.starts_with("eval_")) return "eval/" + std::string(key.substr(5));
  if (key.starts_with("test_")) return "test/" + std::string(key.substr(5));
  return "train/" + std::string(key);
}

std::vector<std::pair<std::string, double>> tensorboard_scalars(const MetricRecord& record) {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& [k, v] : record.fields())
    if (k != "step") out.emplace_back(hf_tensorboard_tag(k), as_double(v));
  return out;
}

MetricsWriter::MetricsWriter(const std::filesystem::path& path,
                             std::optional<int64_t> keep_through_step)
    : path_(path) {
  std::error_code ec;
  if (path_.has_parent_path()) std::filesystem::create_directories(path_.parent_path(), ec);
  if (ec) fail("{}: cannot create its directory: {}", path_.string(), ec.message());
  if (keep_through_step && std::filesystem::exists(path_)) {
    std::istringstream in(read_file(path_));
    std::string line, kept;
    int64_t line_no = 0;
    while (std::getline(in, line)) {
      ++line_no;
      if (line.empty()) continue;
      check_json_text(line, path_.string(), static_cast<size_t>(line_no));
      Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer())
        fail("{}:{}: expected a JSON object with an integer \"step\", got: {}", path_.string(),
             line_no, line.substr(0, 200));
      if (j["step"].get<int64_t>() <= *keep_through_step) {
        kept += line + "\n";
        kept_.push_back(std::move(j));
      }
    }
    write_file_atomic(path_, kept);
  }
  file_ = std::fopen(path_.c_str(), "ab");
  if (!file_) fail("{}: cannot open for appending: {}", path_.string(), std::strerror(errno));
}

MetricsWriter::~MetricsWriter() {
  if (file_) std::fclose(file_);
}

void MetricsWriter::write(const MetricRecord& record) {
  const std::string line = record.to_json().dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    fail("{}: cannot write: {}", path_.string(), std::strerror(errno));
}

void LogWindow::add_step(const StepStats& s) {
  ++steps_;
  last_lr_ = s.learning_rate;
  window_tokens_ += s.tokens;
  num_tokens_ += s.tokens;
  if (s.skipped) {
    ++skipped_;
    return;
  }
  ++trained_;
  loss_sum_ += s.loss;
  targets_ += s.target_tokens;
  correct_ += s.correct_tokens;
  entropy_sum_ += s.entropy_sum;
  last_grad_norm_ = s.grad_norm;
}

MetricRecord LogWindow::take(int64_t global_step, double epoch, double elapsed_seconds) {
  if (steps_ == 0) fail("log at step {}: no optimizer step since the last log", global_step);
  MetricRecord r;
  if (trained_ > 0) r.set("loss", loss_sum_ / static_cast<double>(trained_));
  if (trained_ > 0 && log_grad_norm_) r.set("grad_norm", last_grad_norm_);
  r.set("learning_rate", last_lr_);
  if (targets_ > 0) {
    r.set("entropy", entropy_sum_ / static_cast<double>(targets_));
    r.set("mean_token_accuracy", static_cast<double>(correct_) / static_cast<double>(targets_));
  }
  r.set("num_tokens", static_cast<double>(num_tokens_));
  if (trained_ > 0) r.set("target_tokens", targets_);
  r.set("epoch", epoch);
  if (elapsed_seconds > 0)
    r.set("train_tokens_per_second", static_cast<double>(window_tokens_) / elapsed_seconds);
  if (skipped_ > 0) r.set("skipped_steps", skipped_);
  r.set("step", global_step);
  *this = LogWindow(num_tokens_, log_grad_norm_);
  return r;
}

void EvalAccumulator::add(double sum_ce, int64_t targets, int64_t correct, double sum_entropy) {
  sum_ce_ += sum_ce;
  sum_entropy_ += sum_entropy;
  targets_ += targets;
  correct_ += correct;
}

MetricRecord EvalAccumulator::take(int64_t global_step, double epoch,
                                   const EvalRunInfo& run) const {
  if (targets_ == 0)
    fail("evaluation at step {}: the eval set has no target token, so eval_loss is undefined",
         global_step);
  MetricRecord r;
  r.set("eval_loss", sum_ce_ / static_cast<double>(targets_));
  add_speed_metrics(r, "eval", run.runtime_seconds, static_cast<double>(run.num_samples),
                    static_cast<double>(run.num_steps));
  r.set("eval_entropy", sum_entropy_ / static_cast<double>(targets_));
  r.set("eval_mean_token_accuracy", static_cast<double>(correct_) / static_cast<double>(targets_));
  r.set("eval_num_tokens", static_cast<double>(run.num_tokens));
  r.set("epoch", epoch);
  r.set("step", global_step);
  return r;
}

}  // namespace zt::train
