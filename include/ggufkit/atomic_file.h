// Writing a file so that a crash never leaves a half-written file under the final name: the bytes
// go to a temporary file in the target's directory, which commit() flushes and renames into place.
// Destroying an uncommitted AtomicFile removes the temporary file.
//
// A live writer holds an exclusive flock on its temporary file until it is renamed or removed, and
// marks it as ggufkit's (the extended attribute user.ggufkit.temp; on a file system without
// extended attributes the file's own header, GGUF or NumPy, is the mark). create() removes the
// temporaries of earlier writers of the same target that died (SIGKILL, a power cut): unlocked and
// marked. A file that merely has a temporary's name is never removed.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "ggufkit/error.h"
#include "ggufkit/sink.h"

namespace ggufkit {

class AtomicFile final : public ByteSink {
 public:
  // Checks `policy` (sink.h) against what `target` is now, then creates the temporary file next to
  // the file `target` names (through symbolic links).
  static Expected<std::unique_ptr<AtomicFile>> create(const std::filesystem::path& target,
                                                      const OutputPolicy& policy = {});
  // The checks of create() alone, for a command that writes several files and must refuse before
  // it writes the first.
  static Expected<void> check(const std::filesystem::path& target, const OutputPolicy& policy);
  ~AtomicFile() override;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  Expected<void> write(std::span<const std::byte> bytes) override;
  // Appends `length` bytes of the open file `fd` starting at `offset`, without passing them through
  // user space when the file system allows it (copy_file_range). `progress` gets the bytes copied.
  // `cancel`, when set, stops the copy between two chunks with ErrorCode::cancelled.
  Expected<void> copy_from(int fd, uint64_t offset, uint64_t length,
                           const std::function<void(uint64_t)>& progress = {},
                           const std::atomic<bool>* cancel = nullptr);
  // Permission bits the finished file gets instead of 0666 & ~umask (a rewrite keeps the original's).
  Expected<void> set_permissions(uint32_t mode);
  // Flushes, optionally fsyncs the file and its directory, and renames over the target: commit_all
  // of this one file.
  Expected<void> commit(bool sync = true, const std::atomic<bool>* cancel = nullptr);
  // Commits files as a set: every file is flushed (and with `sync` fsynced) first, then, unless
  // `cancel` was set by then (ErrorCode::cancelled), all are renamed one right after the other, then
  // each directory is fsynced once. Until the renames nothing has a final name: a failure, a cancel
  // or a kill before them leaves none; a failed rename removes the files renamed before it and puts
  // back the ones they replaced (hard links made beside them before the renames).
  // A file whose policy did not allow replacing (OutputPolicy::overwrite false) is renamed without
  // replacing (renameat2 RENAME_NOREPLACE, else link and unlink): a file that appeared under its
  // name since create() is kept and the commit fails with output_exists.
  static Expected<void> commit_all(std::span<const std::unique_ptr<AtomicFile>> files, bool sync = true,
                                   const std::atomic<bool>* cancel = nullptr);
  const std::filesystem::path& temp_path() const { return temp_path_; }

 private:
  AtomicFile() = default;
  Expected<void> flush();
  Expected<void> finish(bool sync);   // flush, fsync, close (the lock is kept on lock_fd_)
  Expected<void> publish();           // the rename into place
  static Expected<void> commit_set(std::span<AtomicFile* const> files, bool sync, const std::atomic<bool>* cancel);
  int fd_ = -1;
  int lock_fd_ = -1;                  // holds the flock from finish() until the rename
  bool may_replace_ = true;           // OutputPolicy::overwrite
  std::filesystem::path output_;      // the target as given (for messages)
  std::filesystem::path target_;
  std::filesystem::path temp_path_;
  std::vector<std::byte> buffer_;
  uint64_t written_ = 0;
  bool committed_ = false;
  int fault_slot_ = -1;  // in the table the SIGBUS handler reads
  uint64_t bus_errors_ = 0;  // bus_error_count() at create(): a fault since then refuses the commit
};

}  // namespace ggufkit
