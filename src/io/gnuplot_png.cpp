#include "io/gnuplot_png.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/file_util.h"

extern char** environ;

namespace zt::io {

namespace fs = std::filesystem;

namespace {

// A gnuplot single-quoted string: ' is written twice, nothing else is special.
std::string quoted(const std::string& s) {
  std::string out(1, '\'');
  for (char c : s) {
    if (c == '\'') out.push_back('\'');
    if (c != '\n') out.push_back(c);
  }
  out.push_back('\'');
  return out;
}

// A scratch directory removed with everything in it on destruction.
struct ScratchDir {
  fs::path path;
  ScratchDir() : path(temp_sibling(fs::temp_directory_path() / "zt_plot")) {
    std::error_code ec;
    fs::create_directories(path, ec);
    if (ec) fail("{}: cannot create a temporary directory: {}", path.string(), ec.message());
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Runs `exe arg` with stdout and stderr into `log`; returns the exit status (128 + signal when
// killed). Throws zt::Error when the process cannot be started.
int run_process(const fs::path& exe, const fs::path& arg, const fs::path& log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  std::string a0 = exe.string(), a1 = arg.string();
  char* argv[] = {a0.data(), a1.data(), nullptr};
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) fail("cannot start {}: {}", exe.string(), std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) fail("waiting for {}: {}", exe.string(), std::strerror(errno));
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool has_finite_point(const PlotPanel& p) {
  for (const auto& c : p.curves)
    for (const auto& [x, y] : c.points)
      if (std::isfinite(x) && std::isfinite(y)) return true;
  return false;
}

}  // namespace

std::optional<fs::path> find_gnuplot() {
  if (const char* e = std::getenv("ZT_GNUPLOT")) {
    if (*e == '\0') return std::nullopt;
    return fs::path(e);
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const fs::path cand = fs::path(dirs.substr(start, end - start)) / "gnuplot";
    if (end > start && ::access(cand.c_str(), X_OK) == 0) return cand;
    start = end + 1;
  }
  return std::nullopt;
}

std::string gnuplot_script(const std::vector<PlotPanel>& panels,
                           const std::vector<std::vector<fs::path>>& data_files,
                           const fs::path& png_path, const std::string& title) {
  const size_t n = panels.size();
  const size_t cols = n > 1 ? 2 : 1, rows = (n + cols - 1) / cols;
  std::string s;
  s += fmt::format("set terminal pngcairo size {},{} font 'sans,11' noenhanced\n", 760 * cols,
                   60 + 440 * rows);
  s += fmt::format("set output {}\n", quoted(png_path.string()));
  // Legend under each plot (never over a curve), a margin around the data so points on the
  // extremes stay visible, gnuplot's own tick labels.
  s += "set encoding utf8\nset grid\nset key below height 1\n";
  s += "set offsets graph 0.02, graph 0.02, graph 0.08, graph 0.08\nset format y '%.6g'\n";
  s += fmt::format("set multiplot layout {},{} title {} font 'sans,13'\n", rows, cols,
                   quoted(title));
  // Colours of the curves in order; the first is drawn thick and solid beneath the others.
  static const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};
  for (size_t p = 0; p < n; ++p) {
    const PlotPanel& panel = panels[p];
    s += fmt::format("set title {}\nset xlabel {}\n", quoted(panel.title), quoted(panel.x_label));
    size_t max_points = 0;
    double x_min = INFINITY, x_max = -INFINITY;
    for (const auto& c : panel.curves) {
      max_points = std::max(max_points, c.points.size());
      for (const auto& pt : c.points) {
        x_min = std::min(x_min, pt.first);
        x_max = std::max(x_max, pt.first);
      }
    }
    // Steps are integers: a short run gets one tick per step instead of 1.5, 2.5, ….
    s += x_max - x_min <= 20 ? "set xtics 1\n" : "set xtics autofreq\n";
    const char* with = max_points <= 60 ? "linespoints" : "lines";
    s += "plot ";
    for (size_t i = 0; i < panel.curves.size(); ++i) {
      if (i) s += ", \\\n     ";
      s += fmt::format("{} using 1:2 with {}", quoted(data_files[p][i].string()), with);
      s += fmt::format(" linecolor rgb '{}'", kColors[i % std::size(kColors)]);
      s += i == 0 ? " linewidth 4 dashtype 1 pointtype 7 pointsize 1.1"
                  : fmt::format(" linewidth 1.5 dashtype {} pointtype {} pointsize 0.8",
                                2 + (i - 1) % 4, 4 + 2 * (i % 3));
      s += fmt::format(" title {}", quoted(panel.curves[i].label));
    }
    s += "\n";
  }
  s += "unset multiplot\nset output\n";
  return s;
}

void plot_png(const std::vector<PlotPanel>& all_panels, const fs::path& png,
              const std::string& title, const fs::path& gnuplot) {
  std::vector<PlotPanel> panels;
  for (const auto& p : all_panels)
    if (has_finite_point(p)) panels.push_back(p);
  if (panels.empty()) fail("{}: nothing to plot (no finite value in any curve)", png.string());
  ScratchDir scratch;
  std::vector<std::vector<fs::path>> files(panels.size());
  for (size_t p = 0; p < panels.size(); ++p) {
    for (size_t i = 0; i < panels[p].curves.size(); ++i) {
      std::string text;
      for (const auto& [x, y] : panels[p].curves[i].points)
        if (std::isfinite(x) && std::isfinite(y)) text += fmt::format("{} {}\n", x, y);
      // gnuplot refuses a plot whose every file is empty, not one empty file among others.
      const fs::path f = scratch.path / fmt::format("panel{}_curve{}.dat", p, i);
      write_file_atomic(f, text);
      files[p].push_back(f);
    }
  }
  const fs::path out = png.has_parent_path() ? png : fs::path(".") / png;
  std::error_code dir_ec;
  if (!fs::is_directory(out.parent_path(), dir_ec))
    fail("{}: cannot write the plot: the directory {} does not exist", png.string(),
         out.parent_path().string());
  const fs::path tmp_png = temp_sibling(out);
  const fs::path script = scratch.path / "plot.gp";
  write_file_atomic(script, gnuplot_script(panels, files, tmp_png, title));
  const fs::path log = scratch.path / "gnuplot.log";
  const int status = run_process(gnuplot, script, log);
  std::error_code ec;
  if (status != 0 || !fs::is_regular_file(tmp_png, ec)) {
    fs::remove(tmp_png, ec);
    std::string msg = fs::exists(log, ec) ? read_file(log) : "";
    fail("{}: {} failed (exit status {}) drawing the plot: {}", png.string(), gnuplot.string(),
         status, msg.substr(0, 2000));
  }
  if (::rename(tmp_png.c_str(), out.c_str()) != 0) {
    const int e = errno;
    fs::remove(tmp_png, ec);
    fail("{}: cannot move the plot into place: {}", png.string(), std::strerror(e));
  }
}

}  // namespace zt::io
