// Byte sinks: where writers send their output.
#pragma once

#include <cstddef>
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

class MemorySink final : public ByteSink {
 public:
  Expected<void> write(std::span<const std::byte> bytes) override {
    data.insert(data.end(), bytes.begin(), bytes.end());
    return {};
  }
  std::vector<std::byte> data;
};

}  // namespace ggufkit
