// bench_estimate: `gguf estimate` as a whole process (exec to exit) on the largest model shape of
// tests/estimate (Gemma-3-27B: 262k tokens, 62 layers; a sparse file, 15 GiB) against the oracle's
// own answer to the same question, libllama's no-allocation load of the file plus one context
// (tests/estimate/memory_oracle.h), both measured on the same file in the same run.
//   bench_estimate [--repeat R] [--gguf PATH_TO_gguf] [--model NAME]
#include "memory_oracle.h"
#include "model_fixtures.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

extern char** environ;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// One run of argv to its exit, stdout and stderr to /dev/null; its wall time.
double run(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ) != 0) {
    std::fprintf(stderr, "bench_estimate: cannot run %s\n", argv[0]);
    std::exit(2);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  const double t = seconds_since(start);
  posix_spawn_file_actions_destroy(&actions);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "bench_estimate: %s failed\n", argv[0]);
    std::exit(2);
  }
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 11;
  std::string gguf = GGUFKIT_CLI_PATH;
  std::string model = "Gemma-3-27B";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--repeat") repeat = std::max(1, std::atoi(argv[i + 1]));
    if (a == "--gguf") gguf = argv[i + 1];
    if (a == "--model") model = argv[i + 1];
  }
  std::string why;
  const auto* oracle = ggufkit::test::MemoryOracle::get(&why);
  if (oracle == nullptr) {
    std::fprintf(stderr, "bench_estimate: %s\n", why.c_str());
    return 2;
  }
  const auto dir = std::filesystem::temp_directory_path() / ("bench-estimate-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = (dir / (model + ".gguf")).string();
  ggufkit::test::write_sparse_model(ggufkit::test::grid_model(model), path);

  std::vector<double> ours, theirs;
  for (int r = 0; r < repeat; ++r) {
    ours.push_back(run({gguf, "estimate", path, "-c", "32768"}));
    ggufkit::test::OracleContext c;
    c.n_ctx = 32768;
    std::vector<std::string> errors;
    const auto start = std::chrono::steady_clock::now();
    const auto m = oracle->measure(path, {c}, &errors);
    theirs.push_back(seconds_since(start));
    if (m.empty() || !m[0]) {
      std::fprintf(stderr, "bench_estimate: the oracle failed: %s\n", errors.empty() ? "" : errors[0].c_str());
      return 2;
    }
  }
  std::filesystem::remove_all(dir);
  const double a = median(ours), b = median(theirs);
  std::printf("%s at 32k, median of %d: gguf estimate (whole process) %.1f ms; llama.cpp's no-alloc load + context "
              "(in process) %.1f ms; ratio %.3f\n",
              model.c_str(), repeat, a * 1e3, b * 1e3, a / b);
  return 0;
}
