// LineProcess (line_process.hpp): a started child fed a line and read to its answer's newline,
// with stderr drained beside it, a deadline per exchange, and its group killed when it goes.
#include "tasks/line_process.hpp"

#include <poll.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <optional>

#include "tasks/child_process.hpp"
#include "tasks/spawner_thread.hpp"

extern char** environ;

namespace astraflow::detail {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kStderrTail = 8192;

// Reads what `fd` has now into `into`, up to a little past `limit` bytes held (a program printing
// without end must not grow it without end); false at end of file or a read error (fd closed).
bool readAvailable(UniqueFd& fd, std::string& into, std::size_t limit = std::string::npos) {
  char chunk[16384];
  while (into.size() <= limit) {
    const ssize_t n = ::read(fd.get(), chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    if (n <= 0) {
      fd.reset();
      return false;
    }
    into.append(chunk, static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace

std::vector<std::string> lineProcessEnvironment(const std::vector<std::pair<std::string, std::string>>& extra) {
  std::vector<std::pair<std::string, std::string>> set = extra;
  set.emplace_back("PYTHONUNBUFFERED", "1");
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const auto name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& [k, v] : set) replaced = replaced || name == k;
    if (!replaced) env.emplace_back(entry);
  }
  for (const auto& [k, v] : set) env.push_back(k + "=" + v);
  return env;
}

struct LineProcess::Impl {
  std::optional<ChildProcess> child;
  UniqueFd in, out, err;
  std::string pending;  // stdout read past the last answer's newline
  std::string err_tail;

  void drainErr() {
    if (!err.valid()) return;
    readAvailable(err, err_tail, 4 * kStderrTail);
    if (err_tail.size() > kStderrTail) err_tail.erase(0, err_tail.size() - kStderrTail);
  }
};

LineProcess::LineProcess(const ProcessSpec& spec) : impl_(std::make_unique<Impl>()) {
  // Cloned from the spawner thread: a pool's worker started by one scoring thread serves others
  // after that thread has ended (spawner_thread.hpp).
  std::optional<StartedChild> started;
  runOnSpawnerThread([&] { started.emplace(startChild(spec)); });
  impl_->child.emplace(started->cloned.pid);
  impl_->in = std::move(started->in);
  impl_->out = std::move(started->out);
  impl_->err = std::move(started->err);
  for (const UniqueFd* fd : {&impl_->in, &impl_->out, &impl_->err}) setNonBlocking(*fd);
}

// Members go in reverse order: the pipes close first (it reads end of file), then the child's
// destructor kills its group and reaps it.
LineProcess::~LineProcess() = default;

bool LineProcess::ended() { return impl_->child->ended(); }
std::string LineProcess::stderrTail() const {
  impl_->drainErr();
  return impl_->err_tail;
}
pid_t LineProcess::pid() const { return impl_->child->pid(); }

LineProcess::Exchange LineProcess::exchange(std::string_view request, double seconds, std::size_t max_line) {
  // A line it printed unasked is not this request's answer.
  if (impl_->out.valid()) readAvailable(impl_->out, impl_->pending);
  impl_->pending.clear();
  return pump(request, true, seconds, max_line);
}

LineProcess::Exchange LineProcess::send(std::string_view line, double seconds) { return pump(line, false, seconds, 0); }

LineProcess::Exchange LineProcess::readLine(double seconds, std::size_t max_line) {
  return pump({}, true, seconds, max_line);
}

// Writes `line` and a newline when `line` is not empty, reading stdout and stderr meanwhile;
// with `want_line`, goes on to the next whole line of stdout. Answered once done.
LineProcess::Exchange LineProcess::pump(std::string_view line, bool want_line, double seconds, std::size_t max_line) {
  Impl& p = *impl_;
  Exchange result;
  const bool has_line = want_line && p.pending.find('\n') != std::string::npos;
  if (!has_line && (!p.in.valid() || !p.out.valid() || p.child->ended())) return result;  // Ended

  const SigpipeSuppressed no_sigpipe;
  std::string message(line);
  if (!message.empty()) message.push_back('\n');
  std::size_t written = 0;
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::max(seconds, 0.0)));
  for (;;) {
    if (!want_line && written == message.size()) {
      result.outcome = Outcome::Answered;
      return result;
    }
    if (const auto nl = p.pending.find('\n'); want_line && nl != std::string::npos && nl > max_line) {
      result.outcome = Outcome::TooLong;  // a whole line, but past the limit: not an answer
      return result;
    }
    if (const auto nl = p.pending.find('\n'); want_line && written == message.size() && nl != std::string::npos) {
      result.outcome = Outcome::Answered;
      result.line = p.pending.substr(0, nl);
      p.pending.erase(0, nl + 1);
      return result;
    }
    if (want_line && p.pending.find('\n') == std::string::npos && p.pending.size() > max_line) {
      result.outcome = Outcome::TooLong;
      return result;
    }
    if (!p.out.valid() || !p.in.valid() || p.child->ended()) {
      // Whatever it wrote before it ended is in the pipe: take it before calling it ended.
      if (p.out.valid()) readAvailable(p.out, p.pending);
      if (want_line && written == message.size() && p.pending.find('\n') != std::string::npos) continue;
      result.outcome = Outcome::Ended;
      return result;
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      result.outcome = Outcome::TimedOut;
      return result;
    }
    std::array<pollfd, 4> fds{};
    nfds_t count = 0;
    const bool writing = written < message.size();
    if (writing) fds[count++] = pollfd{p.in.get(), POLLOUT, 0};
    fds[count++] = pollfd{p.out.get(), POLLIN, 0};
    if (p.err.valid()) fds[count++] = pollfd{p.err.get(), POLLIN, 0};
    if (p.child->pollFd() >= 0) fds[count++] = pollfd{p.child->pollFd(), POLLIN, 0};
    auto wait_ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
    if (p.child->pollFd() < 0) wait_ms = std::min<decltype(wait_ms)>(wait_ms, 10);
    if (poll(fds.data(), count, static_cast<int>(wait_ms)) < 0) {
      if (errno == EINTR) continue;
      throw Error(fmt::format("poll on a line process's pipes: {}", std::strerror(errno)));
    }
    if (writing && fds[0].revents != 0) {
      const ssize_t n = ::write(p.in.get(), message.data() + written, message.size() - written);
      if (n > 0) written += static_cast<std::size_t>(n);
      if (n < 0 && errno != EAGAIN && errno != EINTR) p.in.reset();  // it closed its stdin: EPIPE
    }
    readAvailable(p.out, p.pending, want_line ? max_line + 1 : std::string::npos);
    p.drainErr();
  }
}

}  // namespace astraflow::detail
