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
