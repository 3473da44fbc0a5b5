// Byte sinks: where writers send their output.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <vector>

#include "ggufkit/error.h"

namespace ggufkit {

// Where the bytes go. AtomicFile (io) writes files; MemorySink keeps them in memory (to build a
// file in a buffer, to hash or send it).
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual Expected<void> write(std::span<const std::byte> bytes) = 0;
};

// What a file output may replace. Every file ggufkit writes goes through AtomicFile (io), which
// checks this before a byte is written: a directory, device, FIFO or socket is never replaced
// (output_not_regular), nor a file the same command reads (output_is_input, compared by device and
// inode, so through links and other names too), and an existing file only when `overwrite` is set
// (output_exists). An output that is a symbolic link is written through it: the link stays and its
// target is replaced, as an in-place edit would change it. A replaced file keeps its permissions,
// owner and group.
struct OutputPolicy {
  // Replace an existing regular file. The library's default, as rename(2) replaces; the CLI
  // passes its --force.
  bool overwrite = true;
  // The files the command reads.
  std::vector<std::filesystem::path> inputs;
};

class MemorySink final : public ByteSink {
 public:
  Expected<void> write(std::span<const std::byte> bytes) override {
    data.insert(data.end(), bytes.begin(), bytes.end());
    return {};
  }
  std::vector<std::byte> data;
};

}  // namespace ggufkit
