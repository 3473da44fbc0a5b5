// A read-only memory mapping of a whole file. Move-only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

#include "ggufkit/error.h"

namespace ggufkit {

// For programs (the gguf CLI calls it first thing): a read of a mapped file that shrank after it was
// mapped (another process truncated it, a network file system lost it) raises SIGBUS; with this
// handler the process removes the temporary files of unfinished AtomicFiles, prints one line on
// stderr, "PROGRAM: FILE: the file was truncated ... [io_error]", and exits with status 2 instead of
// dying silently. A library embedding ggufkit decides for itself and need not call it.
void exit_on_bus_error(const char* program);

// For embedders that must not exit (the Python module, which raises an exception instead): a read
// of a mapped file that shrank reads zeros where its bytes are gone instead of raising SIGBUS (the
// faulting page and the rest of that mapping become zero pages), the fault is counted, and every
// AtomicFile created before it refuses to commit (io_error, naming the file that shrank): nothing
// is written from the zeros. A bus error outside ggufkit's mappings goes to the handler installed
// before (or the default action). Not async-signal-safe; call it once, early.
void zero_fill_on_bus_error();
// The faults zero_fill_on_bus_error's handler turned into zeros so far.
uint64_t bus_error_count();
// Whether any of `bytes` lies in the zero-filled part of a mapping (read after the file shrank).
bool lost_to_bus_error(std::span<const std::byte> bytes);

class MappedFile {
 public:
  static Expected<MappedFile> open(const std::filesystem::path& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  size_t size() const { return size_; }
  // The open file the mapping was made from (read-only), or -1 for a default-constructed one.
  int fd() const { return fd_; }
  // Maps the pages of [offset, offset + length) in one call instead of one fault per page.
  // A hint: failures (old kernels) are ignored.
  void prefetch(uint64_t offset, uint64_t length) const;
  // Drops the whole pages inside [offset, offset + length) from the process's resident memory
  // (they stay in the page cache; reading them maps them again), so that streaming through a
  // large file keeps a bounded footprint. A hint: failures are ignored.
  void release(uint64_t offset, uint64_t length) const;

 private:
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;
  int fault_slot_ = -1;  // in the table the SIGBUS handler reads
};

}  // namespace ggufkit
