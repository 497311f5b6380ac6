// The sandbox's seccomp filter and Landlock ruleset (sandbox_policy.hpp), written against the
// kernel ABI directly: no libseccomp, and the Landlock structures are spelled out here because
// the distribution's <linux/landlock.h> predates the network and scope fields.
#include "tasks/sandbox_policy.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "astraflow/core/error.hpp"

namespace astraflow::detail {
namespace {

// ---- seccomp ----------------------------------------------------------------------------

#if defined(__x86_64__)
constexpr std::uint32_t kAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr std::uint32_t kAuditArch = AUDIT_ARCH_AARCH64;
#else
constexpr std::uint32_t kAuditArch = 0;  // no filter written for this architecture
#endif

std::vector<sock_filter> buildSocketFilter() {
  constexpr std::uint32_t kDeny = SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
  std::vector<sock_filter> f;
  auto stmt = [&](std::uint16_t code, std::uint32_t k) { f.push_back(BPF_STMT(code, k)); };
  auto jump = [&](std::uint16_t code, std::uint32_t k, std::uint8_t jt, std::uint8_t jf) {
    f.push_back(BPF_JUMP(code, k, jt, jf));
  };
  stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch));
  jump(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0);
  stmt(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
  stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr));
#if defined(__x86_64__)
  jump(BPF_JMP | BPF_JGE | BPF_K, 0x40000000U, 0, 1);  // __X32_SYSCALL_BIT
  stmt(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
#endif
  // socket(domain, …), socketpair(domain, …): AF_UNIX only. The domain is an int, the low
  // word of the first argument (both architectures are little-endian).
  for (const long nr : {SYS_socket, SYS_socketpair}) {
    jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<std::uint32_t>(nr), 0, 4);
    stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0]));
    jump(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 0, 1);
    stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    stmt(BPF_RET | BPF_K, kDeny);
  }
  for (const long nr : {SYS_io_uring_setup, SYS_io_uring_enter, SYS_io_uring_register}) {
    jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<std::uint32_t>(nr), 0, 1);
    stmt(BPF_RET | BPF_K, kDeny);
  }
  stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  return f;
}

// ---- Landlock ---------------------------------------------------------------------------

constexpr std::uint64_t kExecute = 1ULL << 0, kWriteFile = 1ULL << 1, kReadFile = 1ULL << 2, kReadDir = 1ULL << 3;
constexpr std::uint64_t kAbi1Fs = (1ULL << 13) - 1;  // execute … make_sym
constexpr std::uint64_t kRefer = 1ULL << 13, kTruncate = 1ULL << 14, kIoctlDev = 1ULL << 15;
constexpr std::uint64_t kNetBindConnectTcp = 3, kScopeUnixAndSignal = 3;
constexpr unsigned kCreateRulesetVersion = 1U << 0;
constexpr int kRulePathBeneath = 1;

struct RulesetAttr {
  std::uint64_t handled_access_fs = 0;
  std::uint64_t handled_access_net = 0;  // ABI 4
  std::uint64_t scoped = 0;              // ABI 6
};

struct __attribute__((packed)) PathBeneathAttr {
  std::uint64_t allowed_access;
  std::int32_t parent_fd;
};

std::uint64_t handledFs(int abi) {
  std::uint64_t fs = kAbi1Fs;
  if (abi >= 2) fs |= kRefer;
  if (abi >= 3) fs |= kTruncate;
  if (abi >= 5) fs |= kIoctlDev;
  return fs;
}

// A rule for `path` (folder or file); a file gets only the file rights of `access`.
void addPathRule(int ruleset, const std::string& path, std::uint64_t access, std::uint64_t handled) {
  const UniqueFd fd(::open(path.c_str(), O_PATH | O_CLOEXEC));
  if (!fd.valid()) return;  // not on this system
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return;
  if (!S_ISDIR(st.st_mode)) access &= kExecute | kWriteFile | kReadFile | kTruncate | kIoctlDev;
  const PathBeneathAttr rule{access & handled, fd.get()};
  if (syscall(SYS_landlock_add_rule, ruleset, kRulePathBeneath, &rule, 0U) != 0)
    throw Error(fmt::format("landlock_add_rule for {}: {}", path, std::strerror(errno)));
}

}  // namespace

const sock_fprog* socketFilter() {
  if (kAuditArch == 0) return nullptr;
  struct Program {
    std::vector<sock_filter> code = buildSocketFilter();
    sock_fprog fprog{static_cast<unsigned short>(code.size()), code.data()};
  };
  static const Program program;
  return &program.fprog;
}

int landlockAbi() {
  static const int abi = [] {
    const long v = syscall(SYS_landlock_create_ruleset, nullptr, 0, kCreateRulesetVersion);
    return v < 0 ? 0 : static_cast<int>(v);
  }();
  return abi;
}

UniqueFd landlockRuleset(const LandlockPaths& paths) {
  const int abi = landlockAbi();
  if (abi < 1) return UniqueFd();
  RulesetAttr attr;
  attr.handled_access_fs = handledFs(abi);
  if (abi >= 4) attr.handled_access_net = kNetBindConnectTcp;  // handled with no rule: refused
  if (abi >= 6) attr.scoped = kScopeUnixAndSignal;
  // An older kernel knows a shorter structure and refuses non-zero bytes past it.
  const std::size_t size = abi >= 6   ? sizeof(RulesetAttr)
                           : abi >= 4 ? offsetof(RulesetAttr, scoped)
                                      : offsetof(RulesetAttr, handled_access_net);
  UniqueFd ruleset(static_cast<int>(syscall(SYS_landlock_create_ruleset, &attr, size, 0U)));
  if (!ruleset.valid()) return ruleset;
  const std::uint64_t handled = attr.handled_access_fs;
  for (const std::string& p : paths.read_only) addPathRule(ruleset.get(), p, kReadFile | kReadDir | kExecute, handled);
  for (const std::string& p : paths.devices)
    addPathRule(ruleset.get(), p, kReadFile | kWriteFile | kTruncate | kIoctlDev, handled);
  if (!paths.writable.empty()) addPathRule(ruleset.get(), paths.writable, handled, handled);
  return ruleset;
}

}  // namespace astraflow::detail
