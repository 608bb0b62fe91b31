// Local process launcher (see local_launch.h): fork/exec, signal forwarding with sigtimedwait,
// stop-all on first failure.
#include "dist/local_launch.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include "core/cpu_affinity.h"
#include "core/error.h"
#include "core/log.h"
#include "dist/tcp_socket.h"

extern char** environ;

namespace zt::dist {

namespace {

// The directory where the children mark the errors they printed (cli/error_report.h), removed
// with its files when the launch ends.
class ErrorDir {
 public:
  ErrorDir() {
    std::string t = (std::filesystem::temp_directory_path() / "zt_launch_XXXXXX").string();
    if (::mkdtemp(t.data()) != nullptr) path_ = t;  // none: every rank prints its errors
  }
  ~ErrorDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Whether an inherited environment entry ("NAME=value") is left out of the children's: the
// launcher's own variables (set per child, or by `zerotune launch` through extra_env, so an
// inherited copy, which getenv would find first, never shadows them), and an MPI launcher's.
bool dropped_variable(const std::string& entry,
                      const std::vector<std::pair<std::string, std::string>>& extra_env) {
  static constexpr const char* kOwn[] = {"RANK=",
                                         "WORLD_SIZE=",
                                         "LOCAL_RANK=",
                                         "LOCAL_WORLD_SIZE=",
                                         "MASTER_ADDR=",
                                         "MASTER_PORT=",
                                         "ZT_LAUNCH_ERRORS=",
                                         "ZT_ACCELERATE_CONFIG=",
                                         "ZT_ACCELERATE_REPORTED="};
  for (const char* k : kOwn)
    if (entry.rfind(k, 0) == 0) return true;
  for (const auto& kv : extra_env)
    if (entry.size() > kv.first.size() && entry[kv.first.size()] == '=' &&
        entry.compare(0, kv.first.size(), kv.first) == 0)
      return true;
  return entry.rfind("OMPI_", 0) == 0 || entry.rfind("PMIX_", 0) == 0 ||
         entry.rfind("PMI_", 0) == 0;
}

// The file in the launcher's directory where rank 0 records its last complete checkpoint: three
// lines, exp_dir / checkpoint path (empty: none) / "interrupt" or empty.
constexpr const char* kCheckpointRecord = "checkpoint.record";

// What the launcher says when it kills ranks, from rank 0's record; empty when there is none (the
// job never reached its training loop, or the command is not `train`).
std::string checkpoint_message(const std::string& launch_dir, bool after_signal) {
  if (launch_dir.empty()) return "";
  std::ifstream f(launch_dir + "/" + kCheckpointRecord);
  std::string exp_dir, ckpt, kind;
  if (!std::getline(f, exp_dir)) return "";
  std::getline(f, ckpt);
  std::getline(f, kind);
  const std::string last =
      ckpt.empty() ? fmt::format("none (this run wrote no checkpoint in {})", exp_dir) : ckpt;
  if (!after_signal) return fmt::format("last complete checkpoint: {}", last);
  if (kind == "interrupt")
    return fmt::format("ranks killed after the interrupt checkpoint {} was written", ckpt);
  return fmt::format(
      "ranks killed before the interrupt checkpoint was written; last complete checkpoint: {}",
      last);
}

int status_code(int st) {
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return 1;
}

std::string describe_status(int st) {
  if (WIFEXITED(st)) return fmt::format("exited with status {}", WEXITSTATUS(st));
  if (WIFSIGNALED(st))
    return fmt::format("was killed by signal {} ({})", WTERMSIG(st), strsignal(WTERMSIG(st)));
  return "stopped";
}

}  // namespace

void note_checkpoint_for_launcher(const std::string& exp_dir, const std::string& checkpoint,
                                  bool interrupt) {
  const char* dir = std::getenv("ZT_LAUNCH_ERRORS");
  if (dir == nullptr || *dir == '\0') return;
  const std::string path = std::string(dir) + "/" + kCheckpointRecord;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << exp_dir << '\n' << checkpoint << '\n' << (interrupt ? "interrupt" : "") << '\n';
    if (!f.flush()) return;
  }
  std::rename(tmp.c_str(), path.c_str());
}

int pick_free_port(const std::string& addr) {
  int port = 0;
  tcp::Fd fd = tcp::listen_on(addr, 0, &port);
  return port;
}

int launch_cpu_count() {
  unsigned n = affinity_cpu_count();
  if (n == 0) n = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(n, 1u, 1u << 20));
}

int max_local_ranks() { return kMaxRanksPerCpu * launch_cpu_count(); }

std::string max_local_ranks_reason() {
  const int cpus = launch_cpu_count();
  return fmt::format("{} per CPU this launcher may use, {} CPU{}; --oversubscribe starts more",
                     kMaxRanksPerCpu, cpus, cpus == 1 ? "" : "s");
}

int run_local_launch(const LocalLaunch& spec) {
  if (spec.num_processes < 1) fail("launch: num_processes {} (expected >= 1)", spec.num_processes);
  if (!spec.oversubscribe && spec.num_processes > max_local_ranks())
    fail("launch: {} ranks on this machine (expected at most {}: {})", spec.num_processes,
         max_local_ranks(), max_local_ranks_reason());
  if (spec.nnodes < 1) fail("launch: --nnodes {} (expected >= 1)", spec.nnodes);
  if (spec.node_rank < 0 || spec.node_rank >= spec.nnodes)
    fail("launch: --node_rank {} (expected 0..{} with --nnodes {})", spec.node_rank,
         spec.nnodes - 1, spec.nnodes);
  if (spec.nnodes > 1 && spec.master_port <= 0)
    fail(
        "launch: --nnodes {} needs --master_port (every node's launcher names the same "
        "rendezvous port on rank 0's node, --master_addr)",
        spec.nnodes);
  const int n = spec.num_processes;
  const int first_rank = spec.node_rank * n, world = spec.nnodes * n;
  const int port = spec.master_port > 0 ? spec.master_port : pick_free_port(spec.master_addr);

  // Everything the children need is built before fork: the child only calls async-signal-safe
  // functions between fork and exec.
  std::vector<std::string> base_env;
  for (char** e = environ; *e; ++e)
    if (!dropped_variable(*e, spec.extra_env)) base_env.emplace_back(*e);
  for (const auto& [k, v] : spec.extra_env) base_env.push_back(k + "=" + v);
  base_env.push_back(fmt::format("WORLD_SIZE={}", world));
  base_env.push_back(fmt::format("LOCAL_WORLD_SIZE={}", n));
  base_env.push_back("MASTER_ADDR=" + spec.master_addr);
  base_env.push_back(fmt::format("MASTER_PORT={}", port));
  // The stop signals are blocked before anything is created that a signal's default action would
  // leave behind (the error folder), and stay so until the ranks have ended: sigtimedwait takes
  // them. While blocked none is delivered, so a handler the caller installed for its own set-up
  // (cmd_launch's) gives way to the default action, as the ranks get it across execve.
  sigset_t watch, old;
  sigemptyset(&watch);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&watch, s);
  if (sigprocmask(SIG_BLOCK, &watch, &old) != 0)
    fail("launch: sigprocmask: {}", std::strerror(errno));
  for (int s : {SIGINT, SIGTERM, SIGHUP}) signal(s, SIG_DFL);
  const ErrorDir errors;
  if (!errors.path().empty()) base_env.push_back("ZT_LAUNCH_ERRORS=" + errors.path());
  std::vector<std::vector<std::string>> envs(static_cast<size_t>(n), base_env);
  std::vector<std::vector<char*>> envps(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    auto& e = envs[static_cast<size_t>(r)];
    e.push_back(fmt::format("RANK={}", first_rank + r));
    e.push_back(fmt::format("LOCAL_RANK={}", r));
    for (auto& s : e) envps[static_cast<size_t>(r)].push_back(s.data());
    envps[static_cast<size_t>(r)].push_back(nullptr);
  }
  std::vector<std::string> args = spec.args;
  std::string exe = spec.exe;
  std::vector<char*> argv;
  argv.push_back(exe.data());
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  const pid_t parent = getpid();
  std::vector<pid_t> pids(static_cast<size_t>(n), -1);
  std::vector<bool> alive(static_cast<size_t>(n), false);
  int alive_count = 0;
  auto signal_alive = [&](int sig) {
    for (int r = 0; r < n; ++r)
      if (alive[static_cast<size_t>(r)]) kill(pids[static_cast<size_t>(r)], sig);
  };
  if (spec.nnodes > 1)
    log::info("launch: node {} of {}: starting ranks {}..{} of {}, MASTER_ADDR={} MASTER_PORT={}",
              spec.node_rank, spec.nnodes, first_rank, first_rank + n - 1, world, spec.master_addr,
              port);
  else
    log::info("launch: starting {} process(es), MASTER_ADDR={} MASTER_PORT={}", n, spec.master_addr,
              port);
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid < 0) {
      const int err = errno;
      signal_alive(SIGKILL);
      while (wait(nullptr) > 0) {
      }
      sigprocmask(SIG_SETMASK, &old, nullptr);
      fail("launch: cannot start rank {}: fork failed: {}", r, std::strerror(err));
    }
    if (pid == 0) {
      sigprocmask(SIG_SETMASK, &old, nullptr);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      execve(exe.c_str(), argv.data(), envps[static_cast<size_t>(r)].data());
      const char msg[] = "zerotune: launch: execve failed\n";
      ssize_t ignored = write(2, msg, sizeof(msg) - 1);
      (void)ignored;
      _exit(127);
    }
    pids[static_cast<size_t>(r)] = pid;
    alive[static_cast<size_t>(r)] = true;
    ++alive_count;
  }

  int result = 0;         // first failure's code, or 128 + forwarded signal
  bool stopping = false;  // we asked the children to stop
  int forwarded = 0;      // user signals received
  double kill_at = std::numeric_limits<double>::infinity();
  double grace = 0;  // the SIGTERM -> SIGKILL delay in force
  auto kill_all = [&](const std::string& why) {
    log::warn("launch: {}", why);
    const std::string m = checkpoint_message(errors.path(), forwarded > 0);
    if (!m.empty()) log::warn("launch: {}", m);
    signal_alive(SIGKILL);
  };
  while (alive_count > 0) {
    timespec ts{0, 100 * 1000 * 1000};
    siginfo_t info{};
    const int sig = sigtimedwait(&watch, &info, &ts);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      ++forwarded;
      if (forwarded == 1) {
        log::warn("launch: got signal {} ({}); forwarding it to {} process(es)", sig,
                  strsignal(sig), alive_count);
        signal_alive(sig);
        if (result == 0) result = 128 + sig;
        stopping = true;
        grace = spec.kill_grace_s;
        kill_at = tcp::now_s() + grace;
      } else if (alive_count > 0) {
        kill_all("second signal; killing the remaining process(es)");
      }
    }
    for (int r = 0; r < n; ++r) {
      if (!alive[static_cast<size_t>(r)]) continue;
      int st = 0;
      const pid_t got = waitpid(pids[static_cast<size_t>(r)], &st, WNOHANG);
      if (got != pids[static_cast<size_t>(r)]) continue;
      alive[static_cast<size_t>(r)] = false;
      --alive_count;
      const int code = status_code(st);
      if (code != 0 && !stopping) {
        result = code;
        stopping = true;
        log::warn("launch: rank {} (pid {}) {}; stopping the other {} process(es)", first_rank + r,
                  pids[static_cast<size_t>(r)], describe_status(st), alive_count);
        signal_alive(SIGTERM);
        signal_alive(SIGCONT);  // a stopped (SIGSTOP) rank would never see the SIGTERM
        grace = std::min(spec.kill_grace_s, kFailureGraceS);
        kill_at = tcp::now_s() + grace;
      } else if (code != 0) {
        log::debug("launch: rank {} {}", r, describe_status(st));
      }
    }
    if (alive_count > 0 && tcp::now_s() >= kill_at) {
      kill_all(fmt::format("{} process(es) still running {:g} s after SIGTERM; killing them",
                           alive_count, grace));
      kill_at = std::numeric_limits<double>::infinity();
    }
  }
  sigprocmask(SIG_SETMASK, &old, nullptr);
  return result;
}

}  // namespace zt::dist
