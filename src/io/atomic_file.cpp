#include "ggufkit/atomic_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "io/fault_registry.h"
#include "io/file_kind.h"

namespace ggufkit {
namespace {

constexpr size_t kBufferBytes = size_t{1} << 20;

// An I/O error about the output: its file, what failed and the system's reason (errno), no offset.
// EFAULT is not the output's fault: the bytes handed to write(2) were in a mapping of an input that
// shrank under it (the same event that raises SIGBUS when the process itself reads them).
Error io_error(const std::filesystem::path& output, std::string_view what) {
  if (errno == EFAULT) {
    return make_error(ErrorCode::io_error, std::nullopt, {},
                      "the input was truncated or became unreadable while it was read; nothing was written");
  }
  return with_file(make_error(ErrorCode::io_error, std::nullopt, {}, fmt::format("{}: {}", what, std::strerror(errno))),
                   output.string());
}


// The file an output path names: itself, or the end of its chain of symbolic links (which may not
// exist yet: a dangling link is written through, creating its target).
std::filesystem::path resolve_links(const std::filesystem::path& target) {
  std::filesystem::path at = target;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    if (::lstat(at.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return at;
    std::error_code ec;
    const std::filesystem::path next = std::filesystem::read_symlink(at, ec);
    if (ec) return at;
    at = next.is_absolute() ? next : at.parent_path() / next;
  }
  return at;  // a loop: open and rename fail on it with the system's reason (ELOOP)
}

}  // namespace

namespace {

// The checks of OutputPolicy against the file `resolved` (target through its links) is now; the
// stat of the existing file when there is one.
Expected<std::optional<struct stat>> check_output(const std::filesystem::path& target,
                                                  const std::filesystem::path& resolved, const OutputPolicy& policy) {
  const auto fail = [&](ErrorCode code, std::string message) {
    return with_file(make_error(code, std::nullopt, {}, std::move(message)), target.string());
  };
  struct stat existing {};
  if (::stat(resolved.c_str(), &existing) != 0) return std::optional<struct stat>();
  if (!S_ISREG(existing.st_mode)) {
    return fail(ErrorCode::output_not_regular,
                fmt::format("is {}: refusing to replace it with a file", io::file_kind(existing.st_mode)));
  }
  for (const std::filesystem::path& input : policy.inputs) {
    struct stat in {};
    if (::stat(input.c_str(), &in) == 0 && in.st_dev == existing.st_dev && in.st_ino == existing.st_ino) {
      return fail(ErrorCode::output_is_input,
                  input == target ? std::string("is an input of this command: refusing to overwrite it")
                                  : fmt::format("is an input of this command ({}): refusing to overwrite it",
                                                input.string()));
    }
  }
  if (!policy.overwrite) return fail(ErrorCode::output_exists, "already exists (--force replaces it)");
  return std::optional<struct stat>(existing);
}

// The mark of a ggufkit temporary file (an extended attribute): a file without it is not ours.
constexpr const char* kTempMark = "user.ggufkit.temp";

// Whether the temporary file open on `fd` is provably one ggufkit made: it bears the mark. On a
// file system without extended attributes nothing is proof (a user's copy of a GGUF file may have
// a temporary's name), so nothing there is removed: a dead writer's temporary stays.
bool is_ours(int fd) {
  char mark[8];
  return ::fgetxattr(fd, kTempMark, mark, sizeof mark) >= 0;
}

// Removes the temporary files of earlier writers of `target` that died (SIGKILL, a power cut):
// a live writer holds an exclusive flock on its temporary file from before it marks it until it is
// renamed or removed, so one that is marked and can be locked belongs to nobody. A file that only
// has a temporary's name (no mark) is left alone, as is anything that is not a regular file.
void remove_stale_temporaries(const std::filesystem::path& dir, const std::string& prefix) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix) || name.size() != prefix.size() + 6) continue;
    struct stat named {};
    if (::lstat(entry.path().c_str(), &named) != 0 || !S_ISREG(named.st_mode)) continue;
    const io::OpenedFile f = io::open_regular(entry.path().c_str(), O_RDONLY | O_NOFOLLOW);
    if (f.fd < 0) continue;
    struct stat st {};
    if (::fstat(f.fd, &st) == 0 && st.st_ino == named.st_ino && st.st_dev == named.st_dev &&
        ::flock(f.fd, LOCK_EX | LOCK_NB) == 0 && is_ours(f.fd)) {
      ::unlink(entry.path().c_str());
    }
    ::close(f.fd);
  }
}

}  // namespace

Expected<void> AtomicFile::check(const std::filesystem::path& target, const OutputPolicy& policy) {
  auto r = check_output(target, resolve_links(target), policy);
  if (!r) return std::move(r).error();
  return {};
}

Expected<std::unique_ptr<AtomicFile>> AtomicFile::create(const std::filesystem::path& target,
                                                         const OutputPolicy& policy) {
  std::unique_ptr<AtomicFile> f(new AtomicFile());
  f->target_ = resolve_links(target);
  auto checked_output = check_output(target, f->target_, policy);
  if (!checked_output) return std::move(checked_output).error();
  const bool exists = checked_output->has_value();
  struct stat existing {};
  if (exists) existing = **checked_output;
  std::filesystem::path dir = f->target_.parent_path();
  if (dir.empty()) dir = ".";
  const std::string prefix = "." + f->target_.filename().string() + ".tmp-";
  remove_stale_temporaries(dir, prefix);
  std::string tmpl = (dir / (prefix + "XXXXXX")).string();
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) return io_error(target, fmt::format("cannot create a file in {}", dir.string()));
  // Held until the file is renamed or removed: tells this live writer from a dead one. (Another
  // writer's cleaner may hold it for a moment: it finds the file unmarked and lets it go.) Then the
  // mark that says the file is ggufkit's (where the file system has extended attributes).
  while (::flock(fd, LOCK_EX) != 0 && errno == EINTR) {
  }
  ::fsetxattr(fd, kTempMark, "1", 1, 0);
  if (exists) {
    // A replaced file keeps its permissions, owner and group (the owner only when the process may
    // give it away, as root; the group when the process is in it).
    ::fchmod(fd, existing.st_mode & 07777);
    if (::fchown(fd, existing.st_uid, existing.st_gid) != 0) ::fchown(fd, static_cast<uid_t>(-1), existing.st_gid);
  } else {
    // mkstemp creates 0600; a new file gets the usual permissions.
    const mode_t mask = ::umask(0);
    ::umask(mask);
    ::fchmod(fd, 0666 & ~mask);
  }
  f->fd_ = fd;
  f->may_replace_ = policy.overwrite;
  f->output_ = target;
  f->temp_path_ = tmpl;
  f->fault_slot_ = io::register_temporary(tmpl);  // removed by the SIGBUS handler too
  f->bus_errors_ = io::bus_error_count();
  f->buffer_.reserve(kBufferBytes);
  return f;
}

AtomicFile::~AtomicFile() {
  io::release_temporary(fault_slot_);
  // Removed while still locked: no cleaner takes it for a dead writer's in between.
  if (!committed_ && !temp_path_.empty()) ::unlink(temp_path_.c_str());
  if (fd_ >= 0) ::close(fd_);
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

Expected<void> AtomicFile::flush() {
  size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error(target_, "cannot write");
    }
    done += static_cast<size_t>(n);
    written_ += static_cast<uint64_t>(n);
  }
  buffer_.clear();
  return {};
}

Expected<void> AtomicFile::write(std::span<const std::byte> bytes) {
  if (fd_ < 0) return make_error(ErrorCode::io_error, written_, {}, "write after commit");
  if (buffer_.size() + bytes.size() <= kBufferBytes) {
    buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
    return {};
  }
  if (auto r = flush(); !r) return r;
  if (bytes.size() < kBufferBytes) {
    buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
    return {};
  }
  // Large spans (tensor data) go straight to the file.
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error(target_, "cannot write");
    }
    bytes = bytes.subspan(static_cast<size_t>(n));
    written_ += static_cast<uint64_t>(n);
  }
  return {};
}

Expected<void> AtomicFile::copy_from(int fd, uint64_t offset, uint64_t length,
                                     const std::function<void(uint64_t)>& progress, const std::atomic<bool>* cancel) {
  if (fd_ < 0) return make_error(ErrorCode::io_error, written_, {}, "write after commit");
  if (auto r = flush(); !r) return r;
  // Chunks keep progress reports coming and let the kernel interleave other work.
  constexpr uint64_t kChunk = uint64_t{64} << 20;
  const uint64_t end = offset + length;
  uint64_t at = offset;
  bool in_kernel = true;
  std::vector<std::byte> buffer;
  auto copy_segment = [&](uint64_t segment_end) -> Expected<void> {
    while (at < segment_end) {
      if (cancel != nullptr && cancel->load()) return make_error(ErrorCode::cancelled, std::nullopt, {}, "cancelled");
      const size_t want = static_cast<size_t>(std::min(kChunk, segment_end - at));
      ssize_t n = -1;
      if (in_kernel) {
        loff_t in = static_cast<loff_t>(at);
        n = ::copy_file_range(fd, &in, fd_, nullptr, want, 0);
        if (n < 0 && errno == EINTR) continue;
        // Not offered between these files (another file system, an old kernel): copy through memory.
        if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EOPNOTSUPP || errno == EINVAL)) {
          in_kernel = false;
          continue;
        }
      } else {
        buffer.resize(std::min<size_t>(want, size_t{1} << 20));
        n = ::pread(fd, buffer.data(), std::min(buffer.size(), want), static_cast<off_t>(at));
        if (n < 0 && errno == EINTR) continue;
        for (size_t put = 0; n > 0 && put < static_cast<size_t>(n);) {
          const ssize_t w = ::write(fd_, buffer.data() + put, static_cast<size_t>(n) - put);
          if (w < 0 && errno == EINTR) continue;
          if (w < 0) return io_error(target_, "cannot write");
          put += static_cast<size_t>(w);
        }
      }
      if (n < 0) return io_error(target_, "cannot copy the data");
      if (n == 0) return make_error(ErrorCode::io_error, at, {}, fmt::format("the source ended {} bytes early", end - at));
      at += static_cast<uint64_t>(n);
      written_ += static_cast<uint64_t>(n);
      if (progress) progress(at - offset);
    }
    return {};
  };
  // Holes in the source (a sparse file) stay holes: skip them in the output too.
  while (at < end) {
    const off_t data = ::lseek(fd, static_cast<off_t>(at), SEEK_DATA);
    uint64_t data_start = at, data_end = end;
    if (data < 0) {
      if (errno == ENXIO) data_start = end;  // only a hole up to the end of the file
    } else {
      data_start = std::min<uint64_t>(static_cast<uint64_t>(data), end);
      const off_t hole = ::lseek(fd, data, SEEK_HOLE);
      if (hole >= 0) data_end = std::min<uint64_t>(static_cast<uint64_t>(hole), end);
    }
    if (data_start > at) {
      const uint64_t gap = data_start - at;
      if (::lseek(fd_, static_cast<off_t>(gap), SEEK_CUR) < 0) return io_error(target_, "cannot seek");
      at += gap;
      written_ += gap;
      if (::ftruncate(fd_, static_cast<off_t>(written_)) != 0) {
        return io_error(target_, "cannot extend the file");
      }
      if (progress) progress(at - offset);
    }
    if (auto r = copy_segment(std::max(data_end, at)); !r) return r;
  }
  return {};
}

Expected<void> AtomicFile::set_permissions(uint32_t mode) {
  if (fd_ < 0 || ::fchmod(fd_, static_cast<mode_t>(mode & 07777)) != 0) {
    return io_error(target_, "cannot set the permissions");
  }
  return {};
}

Expected<void> AtomicFile::finish(bool sync) {
  if (fd_ < 0) return make_error(ErrorCode::io_error, written_, {}, "commit twice");
  if (auto r = flush(); !r) return r;
  if (io::bus_error_count() != bus_errors_) {  // an input shrank while it was read: zeros were written
    return with_file(make_error(ErrorCode::io_error, std::nullopt, {},
                                "the file was truncated or became unreadable while it was read (bus error); nothing was written"),
                     io::last_bus_error_file());
  }
  if (sync && ::fsync(fd_) != 0) return io_error(target_, "cannot sync");
  // The descriptor is closed now, to hear of a failure (a network file system reports some only
  // then); a duplicate keeps the lock until the rename, so that the file never looks abandoned.
  lock_fd_ = ::dup(fd_);
  if (::close(fd_) != 0) {
    fd_ = -1;
    return io_error(target_, "cannot close");
  }
  fd_ = -1;
  return {};
}

Expected<void> AtomicFile::publish() {
  const auto rename_failed = [&] { return io_error(target_, fmt::format("cannot rename {} to it", temp_path_.string())); };
  const auto appeared = [&] {
    return with_file(make_error(ErrorCode::output_exists, std::nullopt, {},
                                "already exists (--force replaces it): it appeared while this command wrote"),
                     output_.string());
  };
  if (may_replace_) {
    if (::rename(temp_path_.c_str(), target_.c_str()) != 0) return rename_failed();
  } else if (::renameat2(AT_FDCWD, temp_path_.c_str(), AT_FDCWD, target_.c_str(), RENAME_NOREPLACE) != 0) {
    if (errno == EEXIST) return appeared();
    if (errno != EINVAL && errno != ENOSYS) return rename_failed();
    // A file system without RENAME_NOREPLACE: a hard link cannot replace either.
    if (::link(temp_path_.c_str(), target_.c_str()) == 0) {
      ::unlink(temp_path_.c_str());
    } else if (errno == EEXIST) {
      return appeared();
    } else {
      // Neither (no hard links either): the last check, then a plain rename.
      struct stat st {};
      if (::lstat(target_.c_str(), &st) == 0) return appeared();
      if (::rename(temp_path_.c_str(), target_.c_str()) != 0) return rename_failed();
    }
  }
  committed_ = true;
  io::release_temporary(std::exchange(fault_slot_, -1));
  return {};
}

Expected<void> AtomicFile::commit(bool sync, const std::atomic<bool>* cancel) {
  AtomicFile* const self[] = {this};
  return commit_set(self, sync, cancel);
}

Expected<void> AtomicFile::commit_all(std::span<const std::unique_ptr<AtomicFile>> files, bool sync,
                                      const std::atomic<bool>* cancel) {
  std::vector<AtomicFile*> set;
  for (const auto& f : files) set.push_back(f.get());
  return commit_set(set, sync, cancel);
}

Expected<void> AtomicFile::commit_set(std::span<AtomicFile* const> files, bool sync, const std::atomic<bool>* cancel) {
  const auto cancelled = [&] { return cancel != nullptr && cancel->load(); };
  const auto stop = [] { return make_error(ErrorCode::cancelled, std::nullopt, {}, "cancelled"); };
  // Every file complete on disk first: the slow part, during which a cancel is still heard.
  for (const auto& f : files) {
    if (cancelled()) return stop();
    if (auto r = f->finish(sync); !r) return r;
  }
  if (cancelled()) return stop();
  // Before the renames, each file a rename may replace gets a second name beside it (a hard link,
  // ".NAME.saved-PID-N"): a failed rename can then put back the files the ones before it replaced.
  std::vector<std::filesystem::path> saved(files.size());
  std::vector<bool> existed(files.size());
  const auto drop_saved = [&] {
    for (const auto& p : saved) {
      if (!p.empty()) ::unlink(p.c_str());
    }
  };
  if (files.size() > 1) {
    static std::atomic<uint64_t> counter{0};
    for (size_t i = 0; i < files.size(); ++i) {
      const AtomicFile& f = *files[i];
      struct stat st {};
      if (!f.may_replace_ || ::lstat(f.target_.c_str(), &st) != 0) continue;
      existed[i] = true;
      if (!S_ISREG(st.st_mode)) continue;
      const std::filesystem::path p = f.target_.parent_path() /
          fmt::format(".{}.saved-{}-{}", f.target_.filename().string(), ::getpid(), counter++);
      if (::link(f.target_.c_str(), p.c_str()) == 0) saved[i] = p;
    }
  }
  // The renames, one right after the other: the only moment a kill can leave part of a set.
  for (size_t i = 0; i < files.size(); ++i) {
    if (auto r = files[i]->publish(); !r) {
      // No partial set: each file renamed already is taken back, the one it replaced put back.
      for (size_t j = 0; j < i; ++j) {
        AtomicFile& f = *files[j];
        if (!saved[j].empty()) {
          if (::rename(saved[j].c_str(), f.target_.c_str()) == 0) saved[j].clear();
          continue;
        }
        // Only this commit's file, not whatever has its name now; a replaced file that could not be
        // saved is not removed (the new file stays in its place).
        struct stat ours {}, there {};
        if (!existed[j] && f.lock_fd_ >= 0 && ::fstat(f.lock_fd_, &ours) == 0 &&
            ::lstat(f.target_.c_str(), &there) == 0 && ours.st_dev == there.st_dev && ours.st_ino == there.st_ino) {
          ::unlink(f.target_.c_str());
        }
      }
      drop_saved();
      return r;
    }
  }
  drop_saved();
  // Then the marks go (a finished file is an ordinary file), and the locks.
  for (AtomicFile* f : files) {
    if (f->lock_fd_ < 0) continue;
    ::fremovexattr(f->lock_fd_, kTempMark);
    ::close(std::exchange(f->lock_fd_, -1));
  }
  if (sync) {
    std::vector<std::filesystem::path> synced;
    for (const auto& f : files) {
      std::filesystem::path dir = f->target_.parent_path();
      if (dir.empty()) dir = ".";
      if (std::ranges::find(synced, dir) != synced.end()) continue;
      synced.push_back(dir);
      const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (dfd >= 0) {
        ::fsync(dfd);
        ::close(dfd);
      }
    }
  }
  return {};
}

}  // namespace ggufkit
