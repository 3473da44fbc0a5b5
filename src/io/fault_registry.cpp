// The tables behind fault_registry.h and the SIGBUS handler of mapped_file.h.
#include "io/fault_registry.h"

#include <signal.h>
#include <sys/mman.h>
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
  std::atomic<size_t> lost_from{SIZE_MAX};  // the zero-filled tail's offset (zero_fill_on_bus_error)
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

// zero_fill_on_bus_error: the handler before it, the faults it turned into zeros, the last file.
struct sigaction g_previous {};
size_t g_page = 4096;
std::atomic<uint64_t> g_bus_errors{0};
char g_lost_path[kPathBytes] = {};

// Async-signal-safe only: a fault inside a mapping of ours maps zero pages from the faulting page to
// the mapping's end (mmap(2) MAP_FIXED over it: the read is re-executed and reads zeros); any other
// fault goes to the previous handler, or to the default action.
void on_bus_error_zero_fill(int signal, siginfo_t* info, void* context) {
  const char* address = info != nullptr ? static_cast<const char*>(info->si_addr) : nullptr;
  for (MappingSlot& m : g_mappings) {
    if (m.state.load() != 2 || address < m.begin || address >= m.begin + m.size) continue;
    const auto at = reinterpret_cast<uintptr_t>(address) / g_page * g_page;
    const auto end = (reinterpret_cast<uintptr_t>(m.begin) + m.size + g_page - 1) / g_page * g_page;
    void* zeros = ::mmap(reinterpret_cast<void*>(at), end - at, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (zeros == MAP_FAILED) break;
    const size_t from = at - reinterpret_cast<uintptr_t>(m.begin);
    size_t lost = m.lost_from.load();
    while (from < lost && !m.lost_from.compare_exchange_weak(lost, from)) {
    }
    std::memcpy(g_lost_path, m.path, kPathBytes);
    g_bus_errors.fetch_add(1);
    return;
  }
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(signal, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(signal);
  } else {
    ::signal(SIGBUS, SIG_DFL);  // the fault happens again on return, and kills as it would have
  }
}

}  // namespace

uint64_t bus_error_count() { return g_bus_errors.load(); }

std::string last_bus_error_file() { return g_lost_path; }

int register_mapping(const void* begin, size_t size, std::string_view path) {
  const int i = claim(g_mappings);
  if (i < 0) return -1;
  MappingSlot& m = g_mappings[i];
  m.begin = static_cast<const char*>(begin);
  m.size = size;
  m.lost_from.store(SIZE_MAX);
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

namespace ggufkit {

void zero_fill_on_bus_error() {
  io::g_page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  struct sigaction action {};
  action.sa_sigaction = io::on_bus_error_zero_fill;
  action.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&action.sa_mask);
  struct sigaction previous {};
  ::sigaction(SIGBUS, &action, &previous);
  if (previous.sa_sigaction != io::on_bus_error_zero_fill) io::g_previous = previous;
}

uint64_t bus_error_count() { return io::bus_error_count(); }

bool lost_to_bus_error(std::span<const std::byte> bytes) {
  const auto* begin = reinterpret_cast<const char*>(bytes.data());
  for (const io::MappingSlot& m : io::g_mappings) {
    if (m.state.load() != 2) continue;
    const size_t lost = m.lost_from.load();
    if (lost >= m.size) continue;
    if (begin < m.begin + m.size && begin + bytes.size() > m.begin + lost) return true;
  }
  return false;
}

}  // namespace ggufkit
