#include "ggufkit/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "io/fault_registry.h"
#include "io/file_kind.h"

namespace ggufkit {

Expected<MappedFile> MappedFile::open(const std::filesystem::path& path) {
  // A FIFO, a device or a directory is refused before it is opened (opening one can block or act).
  const io::OpenedFile opened = io::open_regular(path.c_str(), O_RDONLY);
  if (opened.fd < 0 && opened.error == 0) {
    return make_error(ErrorCode::io_error, std::nullopt, {}, fmt::format("{}, not a regular file", io::file_kind(opened.mode)));
  }
  if (opened.fd < 0) {
    return make_error(ErrorCode::io_error, std::nullopt, {}, fmt::format("cannot open: {}", std::strerror(opened.error)));
  }
  const int fd = opened.fd;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return make_error(ErrorCode::io_error, std::nullopt, {}, fmt::format("cannot stat: {}", std::strerror(e)));
  }
  MappedFile m;
  m.size_ = static_cast<size_t>(st.st_size);
  if (m.size_ > 0) {
    void* p = ::mmap(nullptr, m.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      return make_error(ErrorCode::io_error, std::nullopt, {}, fmt::format("cannot map: {}", std::strerror(e)));
    }
    m.data_ = static_cast<const std::byte*>(p);
    m.fault_slot_ = io::register_mapping(p, m.size_, path.string());
  }
  // Kept open: whoever rewrites the file copies its data from this very file (the one validated),
  // not from whatever the path names by then.
  m.fd_ = fd;
  return m;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      fd_(std::exchange(other.fd_, -1)),
      fault_slot_(std::exchange(other.fault_slot_, -1)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    this->~MappedFile();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    fd_ = std::exchange(other.fd_, -1);
    fault_slot_ = std::exchange(other.fault_slot_, -1);
  }
  return *this;
}

void MappedFile::prefetch(uint64_t offset, uint64_t length) const {
#ifdef MADV_POPULATE_READ
  if (data_ == nullptr || offset >= size_) return;
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t begin = offset / page * page;
  const uint64_t end = std::min<uint64_t>(size_, offset + std::min<uint64_t>(length, size_ - offset));
  ::madvise(const_cast<std::byte*>(data_) + begin, static_cast<size_t>(end - begin), MADV_POPULATE_READ);
#else
  (void)offset;
  (void)length;
#endif
}

void MappedFile::release(uint64_t offset, uint64_t length) const {
  if (data_ == nullptr || offset >= size_) return;
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  // Whole pages only: a page shared with a neighbour in use would just be faulted in again, but
  // there is no point in it.
  const uint64_t begin = (offset + page - 1) / page * page;
  const uint64_t end = (offset + std::min<uint64_t>(length, size_ - offset)) / page * page;
  if (end <= begin) return;
  // The mapping is private and never written: its pages come back from the file as they were.
  ::madvise(const_cast<std::byte*>(data_) + begin, static_cast<size_t>(end - begin), MADV_DONTNEED);
}

MappedFile::~MappedFile() {
  io::release_mapping(fault_slot_);
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace ggufkit
