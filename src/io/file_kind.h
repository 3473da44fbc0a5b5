// What a file that is not a regular file is, for messages ("is a FIFO").
#pragma once

#include <sys/stat.h>

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

}  // namespace ggufkit::io
