// The tables behind fault_registry.h and the SIGBUS handler of mapped_file.h.
#include "io/fault_registry.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "ggufkit/mapped_file.h"

namespace ggufkit {
namespace io {
namespace {

constexpr size_t kPathBytes = 4096;

// A slot is free (0), being filled or emptied (1), or readable (2).
struct MappingSlot {
  std::atomic<int> state{0};
  const char* begin = nullptr;
  size_t size = 0;
  char path[kPathBytes] = {};
};
struct TemporarySlot {
  std::atomic<int> state{0};
  char path[kPathBytes] = {};
};

MappingSlot g_mappings[256];
TemporarySlot g_temporaries[64];

void copy_path(char (&to)[kPathBytes], std::string_view path) {
  const size_t n = std::min(path.size(), kPathBytes - 1);
  std::memcpy(to, path.data(), n);
  to[n] = '\0';
}

template <class Slot, size_t N>
int claim(Slot (&slots)[N]) {
  for (size_t i = 0; i < N; ++i) {
    int expected = 0;
    if (slots[i].state.compare_exchange_strong(expected, 1)) return static_cast<int>(i);
  }
  return -1;
}

void say(const char* s) {
  const size_t n = std::strlen(s);
  [[maybe_unused]] const ssize_t r = ::write(STDERR_FILENO, s, n);
}

const char* g_program = "gguf";

// Async-signal-safe only: reads the tables, unlink(2), write(2), _exit(2).
void on_bus_error(int, siginfo_t* info, void*) {
  const char* address = info != nullptr ? static_cast<const char*>(info->si_addr) : nullptr;
  const char* file = nullptr;
  for (const MappingSlot& m : g_mappings) {
    if (m.state.load() == 2 && address >= m.begin && address < m.begin + m.size) file = m.path;
  }
  for (TemporarySlot& t : g_temporaries) {
    if (t.state.load() == 2) ::unlink(t.path);
  }
  say(g_program);
  say(": ");
  if (file != nullptr) {
    say(file);
    say(": ");
  }
  say("the file was truncated or became unreadable while it was read (bus error); nothing was written [io_error]\n");
  ::_exit(2);
}

}  // namespace

int register_mapping(const void* begin, size_t size, std::string_view path) {
  const int i = claim(g_mappings);
  if (i < 0) return -1;
  MappingSlot& m = g_mappings[i];
  m.begin = static_cast<const char*>(begin);
  m.size = size;
  copy_path(m.path, path);
  m.state.store(2);
  return i;
}

void release_mapping(int slot) {
  if (slot >= 0) g_mappings[slot].state.store(0);
}

int register_temporary(std::string_view path) {
  const int i = claim(g_temporaries);
  if (i < 0) return -1;
  copy_path(g_temporaries[i].path, path);
  g_temporaries[i].state.store(2);
  return i;
}

void release_temporary(int slot) {
  if (slot >= 0) g_temporaries[slot].state.store(0);
}

}  // namespace io

void exit_on_bus_error(const char* program) {
  io::g_program = program;
  struct sigaction action {};
  action.sa_sigaction = io::on_bus_error;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGBUS, &action, nullptr);
}

}  // namespace ggufkit
