// Line plots to PNG through gnuplot (Debian `gnuplot-nox`, `pngcairo` terminal): a grid of panels,
// each with curves overlaid. zerotune writes each curve's points to a data file and a gnuplot
// script into a temporary directory, runs `gnuplot script`, and renames the PNG into place, so
// the target appears whole or not at all. Used by `zerotune compare`.
//
// Why gnuplot: a well-kept plotting program in Debian, driven by a small text script; no Python
// in the path of a C++ binary, and the plot is re-creatable by hand from the kept script.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace zt::io {

struct PlotCurve {
  std::string label;                              // the legend entry
  std::vector<std::pair<double, double>> points;  // (x, y); non-finite points are left out
};

struct PlotPanel {
  std::string title;
  std::string x_label = "step";
  std::vector<PlotCurve> curves;  // drawn in order: the first thick and solid, the next ones
                                  // thinner and dashed, so curves that coincide stay visible
};

// The gnuplot executable: $ZT_GNUPLOT when set (an empty value = none), else `gnuplot` on PATH.
// nullopt when there is none.
std::optional<std::filesystem::path> find_gnuplot();

// The gnuplot script that draws `panels` (2 columns when there are more than one) into
// `png_path`, each curve i of panel p read from `data_files[p][i]` (columns x y). `title` heads
// the page. Strings are quoted for gnuplot (single quotes, noenhanced text).
std::string gnuplot_script(const std::vector<PlotPanel>& panels,
                           const std::vector<std::vector<std::filesystem::path>>& data_files,
                           const std::filesystem::path& png_path, const std::string& title);

// Draws `panels` into `png` with `gnuplot` (see above). Panels without any finite point are left
// out. Throws zt::Error when there is nothing to draw, when gnuplot cannot be started or fails
// (with its own error output), or when the PNG cannot be moved into place (naming the path).
void plot_png(const std::vector<PlotPanel>& panels, const std::filesystem::path& png,
              const std::string& title, const std::filesystem::path& gnuplot);

}  // namespace zt::io
