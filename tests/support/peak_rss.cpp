// peak-rss OUT PROGRAM [ARGS...]: runs PROGRAM and writes its peak resident memory in KiB (wait4's
// ru_maxrss) to the file OUT; exits with PROGRAM's status (128 + the signal that killed it). The
// tests run the CLI through it because a child forked from a test process starts with the test's
// pages in its count: this process is small, so the figure is PROGRAM's own.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc < 3) return 125;
  const pid_t pid = ::fork();
  if (pid < 0) return 126;
  if (pid == 0) {
    ::execv(argv[2], argv + 2);
    ::_exit(127);
  }
  int status = 0;
  struct rusage usage {};
  if (::wait4(pid, &status, 0, &usage) != pid) return 126;
  if (std::FILE* out = std::fopen(argv[1], "w")) {
    std::fprintf(out, "%ld\n", usage.ru_maxrss);
    std::fclose(out);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
