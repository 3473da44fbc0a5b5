#include "ggufkit/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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
