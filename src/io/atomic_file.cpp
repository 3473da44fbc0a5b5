#include "ggufkit/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include <fmt/format.h>

namespace ggufkit {
namespace {

constexpr size_t kBufferBytes = size_t{1} << 20;

Error io_error(uint64_t offset, const std::string& what) {
  return make_error(ErrorCode::io_error, offset, {}, fmt::format("{}: {}", what, std::strerror(errno)));
}

}  // namespace

Expected<std::unique_ptr<AtomicFile>> AtomicFile::create(const std::filesystem::path& target) {
  std::unique_ptr<AtomicFile> f(new AtomicFile());
  f->target_ = target;
  std::filesystem::path dir = target.parent_path();
  if (dir.empty()) dir = ".";
  std::string tmpl = (dir / ("." + target.filename().string() + ".tmp-XXXXXX")).string();
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) return io_error(0, fmt::format("cannot create a temporary file in {}", dir.string()));
  // mkstemp creates 0600; a finished file gets the usual permissions.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  f->fd_ = fd;
  f->temp_path_ = tmpl;
  f->buffer_.reserve(kBufferBytes);
  return f;
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_path_.empty()) ::unlink(temp_path_.c_str());
}

Expected<void> AtomicFile::flush() {
  size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error(written_, fmt::format("cannot write {}", temp_path_.string()));
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
      return io_error(written_, fmt::format("cannot write {}", temp_path_.string()));
    }
    bytes = bytes.subspan(static_cast<size_t>(n));
    written_ += static_cast<uint64_t>(n);
  }
  return {};
}

Expected<void> AtomicFile::copy_from(int fd, uint64_t offset, uint64_t length,
                                     const std::function<void(uint64_t)>& progress) {
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
          if (w < 0) return io_error(written_ + put, fmt::format("cannot write {}", temp_path_.string()));
          put += static_cast<size_t>(w);
        }
      }
      if (n < 0) return io_error(written_, fmt::format("cannot copy into {}", temp_path_.string()));
      if (n == 0) return make_error(ErrorCode::io_error, written_, {}, fmt::format("the source ended {} bytes early", end - at));
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
      if (::lseek(fd_, static_cast<off_t>(gap), SEEK_CUR) < 0) return io_error(written_, "cannot seek");
      at += gap;
      written_ += gap;
      if (::ftruncate(fd_, static_cast<off_t>(written_)) != 0) {
        return io_error(written_, fmt::format("cannot extend {}", temp_path_.string()));
      }
      if (progress) progress(at - offset);
    }
    if (auto r = copy_segment(std::max(data_end, at)); !r) return r;
  }
  return {};
}

Expected<void> AtomicFile::set_permissions(uint32_t mode) {
  if (fd_ < 0 || ::fchmod(fd_, static_cast<mode_t>(mode & 07777)) != 0) {
    return io_error(0, fmt::format("cannot set the permissions of {}", temp_path_.string()));
  }
  return {};
}

Expected<void> AtomicFile::commit(bool sync) {
  if (fd_ < 0) return make_error(ErrorCode::io_error, written_, {}, "commit twice");
  if (auto r = flush(); !r) return r;
  if (sync && ::fsync(fd_) != 0) return io_error(written_, fmt::format("cannot sync {}", temp_path_.string()));
  if (::close(fd_) != 0) {
    fd_ = -1;
    return io_error(written_, fmt::format("cannot close {}", temp_path_.string()));
  }
  fd_ = -1;
  if (::rename(temp_path_.c_str(), target_.c_str()) != 0) {
    return io_error(written_, fmt::format("cannot rename {} to {}", temp_path_.string(), target_.string()));
  }
  committed_ = true;
  if (sync) {
    std::filesystem::path dir = target_.parent_path();
    if (dir.empty()) dir = ".";
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
  }
  return {};
}

}  // namespace ggufkit
