#include "test_support.h"

#include <fcntl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <gtest/gtest.h>

namespace ggufkit::test {

std::optional<std::filesystem::path> shared_dir() {
  const char* env = std::getenv("GGUFKIT_SHARED_DIR");
  const std::filesystem::path dir = env && *env ? env : GGUFKIT_SHARED_DIR;
  if (std::filesystem::is_directory(dir / "corpus")) return dir;
  return std::nullopt;
}

std::string no_shared_message() {
  return "skipped: the shared corpus (../shared from the project root, or $GGUFKIT_SHARED_DIR) is not here";
}

std::vector<std::filesystem::path> corpus_files() {
  std::vector<std::filesystem::path> out;
  const auto dir = shared_dir();
  if (!dir) return out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(*dir / "corpus")) {
    if (e.is_regular_file() && e.path().extension() == ".gguf") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::filesystem::path sample_model() { return std::filesystem::path(GGUFKIT_SOURCE_DIR) / "samples/tiny-llama-f16.gguf"; }

std::vector<std::byte> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  in.seekg(0, std::ios::end);
  std::vector<std::byte> bytes(static_cast<size_t>(in.tellg()));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return bytes;
}

void write_bytes(const std::filesystem::path& path, const std::vector<std::byte>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::filesystem::path temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("ggufkit-test-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

namespace {
std::string drain(int fd) {
  std::string s;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    s.append(buf, static_cast<size_t>(n));
  }
  return s;
}
}  // namespace

CommandResult run_gguf(const std::vector<std::string>& args) { return run_gguf_with_stdout(args, {}); }

namespace {

// What tracing a child came to: stopped at the call (then detached), or the child's end status
// when it ended first.
struct TraceOutcome {
  bool stopped = false;
  std::optional<int> ended;
};

// The tracer of run_gguf_stopped_at: runs the traced child `pid` (stopped after its exec) up to the
// chosen system call, calls `at_stop` there and detaches.
TraceOutcome trace_until(pid_t pid, const std::vector<long>& syscalls, int nth, const std::function<void(pid_t)>& at_stop) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return {};
  if (!WIFSTOPPED(status)) return {.stopped = false, .ended = status};
  ::ptrace(PTRACE_SETOPTIONS, pid, nullptr, PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL);
  int seen = 0;
  int deliver = 0;
  for (;;) {
    if (::ptrace(PTRACE_SYSCALL, pid, nullptr, deliver) != 0) return {};
    deliver = 0;
    if (::waitpid(pid, &status, 0) != pid) return {};
    if (WIFEXITED(status) || WIFSIGNALED(status)) return {.stopped = false, .ended = status};
    if (!WIFSTOPPED(status)) continue;
    if (WSTOPSIG(status) != (SIGTRAP | 0x80)) {
      deliver = WSTOPSIG(status) == SIGTRAP ? 0 : WSTOPSIG(status);  // the child's own signals go on
      continue;
    }
    __ptrace_syscall_info info{};
    if (::ptrace(PTRACE_GET_SYSCALL_INFO, pid, sizeof info, &info) <= 0) continue;
    if (info.op != PTRACE_SYSCALL_INFO_ENTRY) continue;
    if (std::find(syscalls.begin(), syscalls.end(), static_cast<long>(info.entry.nr)) == syscalls.end()) continue;
    if (++seen < nth) continue;
    at_stop(pid);
    ::ptrace(PTRACE_DETACH, pid, nullptr, 0);
    return {.stopped = true, .ended = std::nullopt};
  }
}

// Runs PREFIX... build/gguf ARGS, stdout to `stdout_path` (captured when empty), under `tracer`
// when one is given.
CommandResult run_cli(const std::vector<std::string>& prefix, const std::vector<std::string>& args,
                      const std::string& stdout_path, const std::function<TraceOutcome(pid_t)>& tracer = {},
                      bool* stopped = nullptr);

}  // namespace

StoppedRun run_gguf_stopped_at(const std::vector<std::string>& args, const std::vector<long>& syscalls, int nth,
                               const std::function<void(pid_t)>& at_stop) {
  StoppedRun run;
  run.result = run_cli(
      {}, args, {}, [&](pid_t pid) { return trace_until(pid, syscalls, nth, at_stop); }, &run.stopped);
  return run;
}

CommandResult run_gguf_with_stdout(const std::vector<std::string>& args, const std::string& stdout_path) {
  return run_cli({}, args, stdout_path);
}

CommandResult run_gguf_measured(const std::vector<std::string>& args) {
  std::string rss_path = (std::filesystem::temp_directory_path() / "ggufkit-run-rss-XXXXXX").string();
  ::close(::mkstemp(rss_path.data()));
  CommandResult r = run_cli({GGUFKIT_PEAK_RSS_PATH, rss_path}, args, {});
  std::ifstream(rss_path) >> r.max_rss_kib;
  ::unlink(rss_path.c_str());
  return r;
}

std::optional<std::string> ptrace_missing() {
  static const std::optional<std::string> why = []() -> std::optional<std::string> {
    const pid_t pid = ::fork();
    if (pid == 0) {
      if (::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) != 0) ::_exit(3);
      ::raise(SIGSTOP);
      ::_exit(0);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (WIFSTOPPED(status)) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return std::nullopt;
    }
    return "this process may not trace its children (ptrace is forbidden here)";
  }();
  return why;
}

std::vector<long> rename_syscalls() {
  return {
#ifdef SYS_rename
      SYS_rename,
#endif
#ifdef SYS_link
      SYS_link,
#endif
      SYS_renameat, SYS_renameat2, SYS_linkat};
}

std::vector<long> fsync_syscalls() { return {SYS_fsync, SYS_fdatasync}; }

namespace {

CommandResult run_cli(const std::vector<std::string>& prefix, const std::vector<std::string>& args,
                      const std::string& stdout_path, const std::function<TraceOutcome(pid_t)>& tracer,
                      bool* stopped) {
  // stdout and stderr go to temporary files so that large outputs cannot deadlock a pipe.
  const auto dir = std::filesystem::temp_directory_path();
  std::string out_path = (dir / "ggufkit-run-out-XXXXXX").string();
  std::string err_path = (dir / "ggufkit-run-err-XXXXXX").string();
  const int out_fd = ::mkstemp(out_path.data());
  const int err_fd = ::mkstemp(err_path.data());
  std::vector<std::string> argv_store = prefix;
  argv_store.push_back(GGUFKIT_CLI_PATH);
  argv_store.insert(argv_store.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_store) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    ::dup2(stdout_path.empty() ? out_fd : ::open(stdout_path.c_str(), O_WRONLY | O_CLOEXEC), 1);
    ::dup2(err_fd, 2);
    if (tracer) ::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);  // stops at the exec
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  const TraceOutcome traced = tracer ? tracer(pid) : TraceOutcome{};
  if (stopped != nullptr) *stopped = traced.stopped;
  if (traced.ended) {
    status = *traced.ended;  // it ended while traced: already waited for
  } else {
    ::waitpid(pid, &status, 0);
  }
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  ::lseek(out_fd, 0, SEEK_SET);
  ::lseek(err_fd, 0, SEEK_SET);
  r.out = drain(out_fd);
  r.err = drain(err_fd);
  ::close(out_fd);
  ::close(err_fd);
  ::unlink(out_path.c_str());
  ::unlink(err_path.c_str());
  return r;
}

}  // namespace

std::optional<std::string> node_llama_cpp_missing() {
  if (std::system("node --version >/dev/null 2>&1") != 0) return "node is not on PATH";
  const std::string modules = std::string(GGUFKIT_SOURCE_DIR) + "/.oracle/node_modules";
  if (!std::filesystem::exists(modules + "/node-llama-cpp/package.json")) {
    return "node-llama-cpp is not installed in " + modules + " (scripts/install-oracle.sh)";
  }
  return std::nullopt;
}

std::string shell_quoted(const std::string& s) {
  // A quote inside is closed, escaped and reopened.
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

NodeRun run_shell(const std::string& command) {
  NodeRun r;
  FILE* p = popen(command.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string first_word_of(const std::string& command) {
  const std::string out = run_shell(command + " 2>/dev/null").out;
  return out.substr(0, out.find_first_of(" \t\n"));
}

std::variant<GgufPy, std::string> gguf_py() {
  const std::filesystem::path scripts =
      std::filesystem::path(GGUFKIT_SOURCE_DIR) / ".oracle" / "llama.cpp" / "gguf-py" / "gguf" / "scripts";
  if (!std::filesystem::exists(scripts / "gguf_hash.py")) {
    return "gguf-py is not checked out in " + scripts.string() + " (scripts/install-oracle.sh)";
  }
  // Debian's python3 first: scripts/install-deps.sh installs python3-numpy and python3-tqdm for it.
  for (const char* candidate : {"/usr/bin/python3", "python3"}) {
    const std::string probe = std::string(candidate) + " -c 'import numpy, tqdm' >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) return GgufPy{candidate, scripts};
  }
  return std::string("no python3 with numpy and tqdm (scripts/install-deps.sh test installs them)");
}

NodeRun run_gguf_py(const GgufPy& py, const std::string& script, const std::vector<std::string>& args) {
  std::string cmd = py.python + " " + shell_quoted((py.scripts / script).string());
  for (const auto& a : args) cmd += " " + shell_quoted(a);
  return run_shell(cmd + " 2>/dev/null");
}

NodeRun run_node_script(const std::string& script, const std::vector<std::string>& args) {
  const auto quoted = shell_quoted;
  std::string cmd = "node " + quoted(std::string(GGUFKIT_SOURCE_DIR) + "/tests/" + script) + " " +
                    quoted(std::string(GGUFKIT_SOURCE_DIR) + "/.oracle/node_modules");
  for (const auto& a : args) cmd += " " + quoted(a);
  return run_shell(cmd + " 2>&1");
}

}  // namespace ggufkit::test
