// Helpers shared by the tests: where the corpus is, reading files, running the CLI.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace ggufkit::test {

// ../shared (or $GGUFKIT_SHARED_DIR); nullopt when absent.
std::optional<std::filesystem::path> shared_dir();
// Every .gguf file under shared/corpus (vocab and tiny-llama), sorted; empty when absent.
std::vector<std::filesystem::path> corpus_files();
// The project's own sample model (always present).
std::filesystem::path sample_model();
// The message tests print when they skip for want of ../shared.
std::string no_shared_message();

std::vector<std::byte> read_bytes(const std::filesystem::path& path);
void write_bytes(const std::filesystem::path& path, const std::vector<std::byte>& bytes);

// The lines of a text (without their newlines; a final newline ends the last line, it does not start
// an empty one).
std::vector<std::string> lines_of(const std::string& text);

// A fresh empty directory under the build's temp area, removed by the caller if it wants.
std::filesystem::path temp_dir(const std::string& name);

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
  long max_rss_kib = 0;  // run_gguf_measured: the command's peak resident memory, in KiB
};
// Runs build/gguf with the given arguments (no shell), capturing stdout and stderr.
CommandResult run_gguf(const std::vector<std::string>& args);
// The same with stdout opened on `stdout_path` (/dev/full, a FIFO...) instead of captured; `out`
// is then empty.
CommandResult run_gguf_with_stdout(const std::vector<std::string>& args, const std::string& stdout_path);
// run_gguf under ptrace, to act at an exact moment of a verb: when the process enters its `nth`
// (1-based) system call among `syscalls` (SYS_fsync, SYS_renameat2...: <sys/syscall.h>), the call
// not yet made, `at_stop(pid)` runs while it is stopped there (to kill it, signal it, or change the
// files under it); then it goes on untraced. `stopped` says whether that call came. Only the main
// thread is traced: for verbs that do their I/O on it (not quantize's workers).
struct StoppedRun {
  CommandResult result;
  bool stopped = false;
};
StoppedRun run_gguf_stopped_at(const std::vector<std::string>& args, const std::vector<long>& syscalls, int nth,
                               const std::function<void(pid_t)>& at_stop);
// Why this process cannot trace its children (a seccomp profile or Yama forbids ptrace), or nullopt.
std::optional<std::string> ptrace_missing();
// The system calls that put a finished file under its name (rename, renameat2, link...) and the
// ones that flush a file to disk, on this architecture, for run_gguf_stopped_at.
std::vector<long> rename_syscalls();
std::vector<long> fsync_syscalls();
// run_gguf with the CLI's peak resident memory in max_rss_kib (measured by the small peak-rss
// helper: a child forked from the test process would count the test's own pages).
CommandResult run_gguf_measured(const std::vector<std::string>& args);

// llama.cpp through node-llama-cpp's JavaScript API: the node scripts under tests/ take the
// oracle's node_modules directory first, then their own arguments.
// Why node-llama-cpp cannot run here (node missing, the oracle not installed), or nullopt.
std::optional<std::string> node_llama_cpp_missing();
struct NodeRun {
  int status = -1;  // the script's exit code (3: node-llama-cpp not importable, by convention)
  std::string out;  // stdout and stderr together
};
// Runs tests/<script> (e.g. "split/llama_eval.mjs") with node: MODULES_DIR then `args`.
NodeRun run_node_script(const std::string& script, const std::vector<std::string>& args);

// `s` in single quotes for the shell.
std::string shell_quoted(const std::string& s);
// Runs a shell command line, stdout captured (stderr as the command redirects it).
NodeRun run_shell(const std::string& command);
// The first word a command prints on stdout (a digest from sha256sum or xxhsum, say); stderr discarded.
std::string first_word_of(const std::string& command);

// gguf-py's scripts (scripts/install-oracle.sh checks them out of the oracle's llama.cpp bundle
// into .oracle/llama.cpp) run with a python3 that has numpy and tqdm.
struct GgufPy {
  std::string python;             // the interpreter
  std::filesystem::path scripts;  // .../gguf-py/gguf/scripts
};
// The interpreter and the scripts directory, or why they cannot run here.
std::variant<GgufPy, std::string> gguf_py();
// Runs `python SCRIPT ARGS...` (no shell quoting needed), stdout captured, stderr discarded.
NodeRun run_gguf_py(const GgufPy& py, const std::string& script, const std::vector<std::string>& args);

}  // namespace ggufkit::test

// Skips the current test when run_gguf_stopped_at cannot trace.
#define GGUFKIT_REQUIRE_PTRACE()                                                                   \
  do {                                                                                             \
    if (const auto why = ::ggufkit::test::ptrace_missing()) GTEST_SKIP() << "skipped: " << *why; \
  } while (0)

// Skips the current test when ../shared is absent.
#define GGUFKIT_REQUIRE_SHARED()                                        \
  do {                                                                  \
    if (!::ggufkit::test::shared_dir()) GTEST_SKIP() << ::ggufkit::test::no_shared_message(); \
  } while (0)
