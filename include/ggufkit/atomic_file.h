// Writing a file so that a crash never leaves a half-written file under the final name: the bytes
// go to a temporary file in the target's directory, which commit() flushes and renames into place.
// Destroying an uncommitted AtomicFile removes the temporary file.
#pragma once

#include <filesystem>
#include <memory>
#include <vector>

#include "ggufkit/error.h"
#include "ggufkit/sink.h"

namespace ggufkit {

class AtomicFile final : public ByteSink {
 public:
  static Expected<std::unique_ptr<AtomicFile>> create(const std::filesystem::path& target);
  ~AtomicFile() override;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  Expected<void> write(std::span<const std::byte> bytes) override;
  // Flushes, optionally fsyncs the file and its directory, and renames over the target.
  Expected<void> commit(bool sync = true);
  const std::filesystem::path& temp_path() const { return temp_path_; }

 private:
  AtomicFile() = default;
  Expected<void> flush();
  int fd_ = -1;
  std::filesystem::path target_;
  std::filesystem::path temp_path_;
  std::vector<std::byte> buffer_;
  uint64_t written_ = 0;
  bool committed_ = false;
};

}  // namespace ggufkit
