// One report per distinct error in a job of several local ranks (`zerotune launch`): a config
// error is found by every rank alike, and printing it N times buries the message. The launcher
// gives its children an empty directory (ZT_LAUNCH_ERRORS); a rank about to print an error first
// creates a file named after the message's hash there, exclusively — the rank that creates it
// prints, a rank that finds it already there prints nothing (the launcher still reports every
// rank's exit status). Messages that differ (a rank's own failure) are all printed.
#pragma once

#include <string_view>

namespace zt::cli {

// The environment variable naming the launcher's error directory.
inline constexpr const char* kLaunchErrorsEnv = "ZT_LAUNCH_ERRORS";

// true: print `message` (the first report of it in the job, or no launcher directory, or the
// directory is unusable — never suppresses on doubt); false: another rank of the job printed it.
bool first_report_of(std::string_view message);

}  // namespace zt::cli
