// runSandboxed (include/astraflow/tasks/sandbox.hpp): a private temp dir, a uid of the run's
// own, limits, namespaces, seccomp and Landlock, all handed to the process runner
// (process_runner.hpp), which starts, watches and reaps the child.
#include "astraflow/tasks/sandbox.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include "astraflow/core/error.hpp"
#include "astraflow/tasks/process_runner.hpp"
#include "tasks/sandbox_policy.hpp"

namespace astraflow {
namespace {

// ---- the temp dir -----------------------------------------------------------------------

// Unlinks every entry of the open folder `dir` but folders; returns the name of a folder left
// in it, if any. Entries are never followed: a link the program made to /etc is unlinked, not
// entered.
std::optional<std::string> removeFilesIn(int dir) {
  fchmod(dir, 0700);  // a host that is not root: the program may have taken its own rights away
  const int listing = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (listing < 0) return std::nullopt;
  DIR* d = fdopendir(listing);
  if (d == nullptr) {
    ::close(listing);
    return std::nullopt;
  }
  std::optional<std::string> folder;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (unlinkat(dir, name.c_str(), 0) != 0 && errno == EISDIR && !folder) folder = name;
  }
  closedir(d);
  return folder;
}

// Removes `root` and everything below it, depth first without recursion (the program may
// have nested folders deeper than the host's stack) and holding one descriptor at a time;
// going back up through ".." is safe because nothing of the run is alive to move folders.
void removeTree(const std::string& root) {
  detail::UniqueFd fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  std::vector<std::string> below;  // the folder names from root down to fd
  while (fd.valid()) {
    if (const auto folder = removeFilesIn(fd.get())) {
      detail::UniqueFd child(openat(fd.get(), folder->c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!child.valid() && errno == EACCES && fchmodat(fd.get(), folder->c_str(), 0700, 0) == 0)
        child.reset(openat(fd.get(), folder->c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!child.valid()) break;  // cannot be entered: give up rather than loop on it
      below.push_back(*folder);
      fd = std::move(child);
      continue;
    }
    if (below.empty()) break;
    fd.reset(openat(fd.get(), "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (fd.valid()) unlinkat(fd.get(), below.back().c_str(), AT_REMOVEDIR);
    below.pop_back();
  }
  fd.reset();
  ::rmdir(root.c_str());
}

// A fresh 0700 folder under /tmp, removed with all it holds when the owner goes.
class SandboxDir {
 public:
  SandboxDir() {
    std::string pattern = "/tmp/astraflow_sandbox_XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr)
      throw Error(fmt::format("cannot create a sandbox folder under /tmp: {}", std::strerror(errno)));
    path_ = pattern;
  }
  ~SandboxDir() { remove(); }
  SandboxDir(const SandboxDir&) = delete;
  SandboxDir& operator=(const SandboxDir&) = delete;

  const std::string& path() const { return path_; }
  void remove() {
    if (!path_.empty()) removeTree(path_);
    path_.clear();
  }

 private:
  std::string path_;
};

// ---- the run's uid ----------------------------------------------------------------------

// Each run in flight in this process gets a uid of its own: RLIMIT_NPROC counts a uid's
// processes across the system, so with one shared uid a fork bomb in one run would make the
// exec of every concurrent run fail; own uids also keep runs from signalling or reading one
// another. uid = base + 64 · (host pid mod 2^16) + slot; past 64 runs at once slots are shared.
constexpr uid_t kSandboxUidBase = 0x70000000;
constexpr int kUidSlots = 64;

class UidLease {
 public:
  UidLease() {
    const std::lock_guard lock(slots().mutex);
    for (int i = 0; i < kUidSlots && !owned_; ++i) {
      const int s = static_cast<int>((slots().next + static_cast<unsigned>(i)) % kUidSlots);
      if ((slots().busy >> s & 1U) == 0) {
        slot_ = s;
        owned_ = true;
        slots().busy |= std::uint64_t{1} << s;
      }
    }
    if (!owned_) slot_ = static_cast<int>(slots().next % kUidSlots);
    slots().next = static_cast<unsigned>(slot_ + 1);  // in turn, not the lowest free one
  }
  ~UidLease() {
    if (!owned_) return;
    const std::lock_guard lock(slots().mutex);
    slots().busy &= ~(std::uint64_t{1} << slot_);
  }
  UidLease(const UidLease&) = delete;
  UidLease& operator=(const UidLease&) = delete;

  uid_t uid() const {
    return kSandboxUidBase + static_cast<uid_t>(kUidSlots) * static_cast<uid_t>(getpid() % 65536) +
           static_cast<uid_t>(slot_);
  }

 private:
  struct Slots {
    std::mutex mutex;
    std::uint64_t busy = 0;
    unsigned next = 0;
  };
  static Slots& slots() {
    static Slots s;
    return s;
  }
  int slot_ = 0;
  bool owned_ = false;
};

// ---- what the child gets ----------------------------------------------------------------

// The system folders, /etc (world-readable configuration; DAC still guards its secrets), and
// the interpreter's prefix (a venv's lib/ beside its bin/) as given and as resolved.
std::vector<std::string> readableRoots(const std::string& interpreter, const std::vector<std::string>& extra) {
  std::vector<std::string> roots = {"/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin", "/etc"};
  auto add_prefix = [&](const std::filesystem::path& exe) {
    const std::filesystem::path bin = exe.parent_path(), prefix = bin.parent_path();
    roots.push_back((prefix.empty() || prefix == prefix.root_path() ? bin : prefix).string());
  };
  std::error_code ec;
  add_prefix(std::filesystem::absolute(interpreter, ec));
  const auto real = std::filesystem::canonical(interpreter, ec);
  if (!ec) add_prefix(real);
  roots.insert(roots.end(), extra.begin(), extra.end());
  return roots;
}

std::vector<std::string> sandboxEnvironment(const std::string& dir) {
  return {"PATH=/usr/local/bin:/usr/bin:/bin",
          "HOME=" + dir,
          "TMPDIR=" + dir,
          "LANG=C.UTF-8",
          "LC_ALL=C.UTF-8",
          "PYTHONDONTWRITEBYTECODE=1",
          "PYTHONHASHSEED=0",
          "PYTHONIOENCODING=utf-8"};
}

void writeProgram(const std::string& path, const std::string& text) {
  const detail::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!fd.valid()) throw Error(fmt::format("cannot write the program to {}: {}", path, std::strerror(errno)));
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(fmt::format("cannot write the program to {}: {}", path, std::strerror(errno)));
    done += static_cast<std::size_t>(n);
  }
}

std::string_view lastLine(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.remove_suffix(1);
  const auto newline = text.rfind('\n');
  return newline == std::string_view::npos ? text : text.substr(newline + 1);
}

SandboxOutcome outcomeOf(const detail::ProcessResult& r, rlim_t cpu_limit) {
  if (r.timed_out) return SandboxOutcome::Timeout;
  if (r.output_limit) return SandboxOutcome::OutputLimit;
  // The CPU limit has soft = hard: the kernel's SIGKILL (SIGXCPU would be ignored by a
  // namespace's init) at the limit.
  const bool cpu_spent = r.cpu_seconds >= static_cast<double>(cpu_limit) - 0.05;
  if (r.signal == SIGXCPU || (r.signal == SIGKILL && cpu_spent)) return SandboxOutcome::Timeout;
  if (r.signal != 0) return SandboxOutcome::Crashed;
  if (r.exit_code != 0 && lastLine(r.err).substr(0, 11) == "MemoryError") return SandboxOutcome::MemoryLimit;
  return SandboxOutcome::Exited;
}

// The real uid of process `pid` (from /proc), or nullopt when it is gone.
std::optional<uid_t> realUidOf(const std::string& pid) {
  std::ifstream status("/proc/" + pid + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Uid:", 0) == 0) return static_cast<uid_t>(std::stoul(line.substr(4)));
  return std::nullopt;
}

// Without a PID namespace a program can leave processes outside its process group (setsid).
// They all run as the run's uid: every process of that uid is killed, through a pidfd opened
// before its uid is read (so a pid reused meanwhile is never signalled), until none is left or
// only zombies the host's init has not reaped yet are (they count against the uid's process
// limit until it does: slots are handed out in turn, so the next run takes another uid).
void killEveryProcessOf(uid_t uid) {
  for (int round = 0; round < 200; ++round) {
    bool found = false;
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
      const std::string pid = entry.path().filename();
      if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
      const detail::UniqueFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, std::stoi(pid), 0U)));
      if (!pidfd.valid() || realUidOf(pid) != uid) continue;
      found = true;
      syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0U);
      // An orphan reparented to this process (the host is PID 1, or a subreaper) is reaped here;
      // any other process's child is not ours to reap (ECHILD).
      siginfo_t info{};
      waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd.get()), &info, WEXITED | WNOHANG | __WALL);
    }
    if (!found) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void checkLimits(const SandboxRequest& request) {
  const SandboxLimits& l = request.limits;
  if (!(l.cpu_seconds > 0) || !(l.wall_seconds > 0) || l.memory_bytes == 0 || l.processes < 1 || l.output_bytes == 0)
    throw Error("sandbox limits must all be positive");
  if (request.program_name.empty() || request.program_name.find('/') != std::string::npos ||
      request.program_name == "." || request.program_name == "..")
    throw Error(fmt::format("the program's file name '{}' is not a plain file name", request.program_name));
}

}  // namespace

const char* sandboxOutcomeName(SandboxOutcome outcome) {
  switch (outcome) {
    case SandboxOutcome::Exited: return "exited";
    case SandboxOutcome::Timeout: return "timeout";
    case SandboxOutcome::MemoryLimit: return "memory_limit";
    case SandboxOutcome::OutputLimit: return "output_limit";
    case SandboxOutcome::Crashed: return "crashed";
  }
  return "crashed";
}

SandboxResult runSandboxed(const SandboxRequest& request) {
  checkLimits(request);
  const SandboxLimits& limits = request.limits;
  detail::ProcessSpec spec;
  spec.executable = detail::findExecutable(request.interpreter);
  SandboxDir dir;
  const bool root = geteuid() == 0;
  std::optional<UidLease> lease;
  if (root) lease.emplace();
  writeProgram(dir.path() + "/" + request.program_name, request.program);
  if (root && chown(dir.path().c_str(), lease->uid(), lease->uid()) != 0)
    throw Error(fmt::format("cannot hand {} to the sandbox uid: {}", dir.path(), std::strerror(errno)));

  spec.argv = {spec.executable};
  spec.argv.insert(spec.argv.end(), request.interpreter_args.begin(), request.interpreter_args.end());
  spec.argv.push_back(request.program_name);  // relative: tracebacks name "main.py", not the temp dir
  spec.env = sandboxEnvironment(dir.path());
  spec.cwd = dir.path();
  spec.stdin_text = request.stdin_text;
  spec.wall_seconds = limits.wall_seconds;
  spec.output_bytes = limits.output_bytes;
  const rlim_t cpu_limit = static_cast<rlim_t>(std::ceil(limits.cpu_seconds));
  detail::ChildIsolation& iso = spec.isolation;
  iso.namespaces = true;
  iso.rlimits = {{RLIMIT_CPU, cpu_limit},
                 {RLIMIT_AS, static_cast<rlim_t>(limits.memory_bytes)},
                 {RLIMIT_FSIZE, static_cast<rlim_t>(limits.file_bytes)},
                 {RLIMIT_NPROC, static_cast<rlim_t>(limits.processes)},
                 {RLIMIT_CORE, 0}};
  iso.seccomp_filter = detail::socketFilter();
  const detail::UniqueFd ruleset =
      detail::landlockRuleset({readableRoots(spec.executable, request.read_paths),
                               {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"},
                               dir.path()});
  iso.landlock_ruleset = ruleset.get();
  if (root) iso.drop_to = std::pair{lease->uid(), static_cast<gid_t>(lease->uid())};

  detail::ProcessResult r;
  try {
    r = detail::runProcess(spec);
  } catch (const detail::ChildStartError& e) {
    if (!root) throw;
    throw Error(
        fmt::format("{} (the sandbox runs it as uid {}: the interpreter and what it loads must be readable "
                    "and executable by any user, e.g. not under /root)",
                    e.what(), lease->uid()));
  }
  if (root && !r.namespaces) killEveryProcessOf(lease->uid());
  SandboxResult result;
  result.outcome = outcomeOf(r, cpu_limit);  // before the texts are moved out of r
  result.exit_code = r.exit_code;
  result.signal = r.signal;
  result.stdout_text = std::move(r.out);
  result.stderr_text = std::move(r.err);
  result.stdout_truncated = r.out_truncated;
  result.stderr_truncated = r.err_truncated;
  result.wall_seconds = r.wall_seconds;
  result.cpu_seconds = r.cpu_seconds;
  result.isolation = {r.namespaces,   r.namespaces, r.user_namespace, root, iso.seccomp_filter != nullptr,
                      ruleset.valid()};
  result.temp_dir = dir.path();
  dir.remove();
  return result;
}

}  // namespace astraflow
