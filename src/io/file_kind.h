// What a file that is not a regular file is, for messages ("is a FIFO"), and opening a file only
// when it is a regular one.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <string_view>

namespace ggufkit::io {

inline std::string_view file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

struct OpenedFile {
  int fd = -1;
  int error = 0;     // errno when fd is -1 and the file could not be opened
  mode_t mode = 0;   // what it is when fd is -1 and error 0: not a regular file (file_kind(mode))
};

// Opens `path` (through symbolic links) with `flags` only when it names a regular file, and opens
// nothing else even for a moment: opening a device, a FIFO or a terminal has effects of its own (a
// writer waiting on the FIFO released, a watchdog armed, a controlling terminal acquired) or
// blocks. The path is opened with O_PATH, which opens no file, checked with fstat, and the file
// then opened through /proc/self/fd: the same inode, whatever the path names by then. Without
// /proc the path is opened again (O_NONBLOCK, O_NOCTTY) and must still be the same file. O_NOFOLLOW
// in `flags` refuses a symbolic link, as open(2) does.
inline OpenedFile open_regular(const char* path, int flags) {
  const int probe = ::open(path, O_PATH | O_CLOEXEC | (flags & O_NOFOLLOW));
  flags &= ~O_NOFOLLOW;  // the /proc entry is a link to the file
  if (probe < 0) return {-1, errno, 0};
  struct stat st {};
  if (::fstat(probe, &st) != 0) {
    const int e = errno;
    ::close(probe);
    return {-1, e, 0};
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(probe);
    return {-1, 0, st.st_mode};
  }
  const std::string proc = "/proc/self/fd/" + std::to_string(probe);
  int fd = ::open(proc.c_str(), flags | O_CLOEXEC);
  int e = errno;
  if (fd < 0 && e == ENOENT && ::access("/proc/self/fd", F_OK) != 0) {
    fd = ::open(path, flags | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    e = errno;
    struct stat again {};
    if (fd >= 0 && (::fstat(fd, &again) != 0 || again.st_dev != st.st_dev || again.st_ino != st.st_ino)) {
      ::close(fd);
      fd = -1;
      e = ESTALE;  // replaced between the check and the open
    } else if (fd >= 0) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    }
  }
  ::close(probe);
  return {fd, fd < 0 ? e : 0, 0};
}

}  // namespace ggufkit::io
