#include "convert/checkpoint_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace ggufkit::convert_detail {
namespace fs = std::filesystem;
namespace {

Error refused(const fs::path& root, const fs::path& file, std::string message) {
  const std::string name = file.lexically_relative(root).string();
  return with_file(make_error(ErrorCode::io_error, std::nullopt, {}, std::move(message)), name.empty() ? file.string() : name);
}

// `path` is `base` or below it (both canonical).
bool within(const fs::path& path, const fs::path& base) {
  auto p = path.begin();
  for (auto b = base.begin(); b != base.end(); ++b, ++p) {
    if (p == path.end() || *p != *b) return false;
  }
  return true;
}

}  // namespace

Expected<void> check_checkpoint_file(const fs::path& root, const fs::path& file) {
  std::error_code ec;
  const fs::path real = fs::canonical(file, ec);
  if (ec) {
    if (!fs::exists(fs::symlink_status(file, ec))) return {};
    return refused(root, file, "a link that leads nowhere: not read");
  }
  const fs::path real_root = fs::canonical(root, ec);
  if (ec) return refused(root, file, "cannot resolve the checkpoint directory");
  bool inside = within(real, real_root);
  // A Hugging Face cache snapshot: <repo>/snapshots/<revision>/NAME -> ../../blobs/<hash>.
  if (!inside && real_root.parent_path().filename() == "snapshots") {
    inside = within(real, real_root.parent_path().parent_path() / "blobs");
  }
  if (!inside) {
    return refused(root, file,
                   fmt::format("a link to {}, outside the checkpoint directory: not read (copy the file in if it "
                               "belongs to the model)", real.string()));
  }
  struct stat st {};
  if (::stat(real.c_str(), &st) != 0) return refused(root, file, fmt::format("cannot stat: {}", std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) return refused(root, file, "not a regular file: not read");
  return {};
}

uint64_t checkpoint_text_limit(const fs::path& relative) {
  const std::string name = relative.filename().string();
  if (name == "config.json" || name == "generation_config.json") return kMaxConfigJsonBytes;
  if (name == "tokenizer_config.json" || name == "chat_template.json" || name == "added_tokens.json") {
    return kMaxTokenizerConfigBytes;
  }
  return kMaxCheckpointTextBytes;
}

Expected<std::optional<std::string>> read_checkpoint_text(const fs::path& root, const fs::path& relative) {
  const fs::path file = root / relative;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(file, ec))) return std::optional<std::string>();
  if (auto r = check_checkpoint_file(root, file); !r) return std::move(r).error();
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return refused(root, file, fmt::format("cannot open: {}", std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return refused(root, file, "not a regular file: not read");
  if (const uint64_t limit = checkpoint_text_limit(relative); static_cast<uint64_t>(st.st_size) > limit) {
    return refused(root, file, fmt::format("{} bytes, over the limit of {} bytes for {}: not read", st.st_size, limit,
                                           relative.filename().string()));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return refused(root, file, fmt::format("cannot read: {}", std::strerror(errno)));
    if (n == 0) break;  // it shrank meanwhile: what there is
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return std::optional<std::string>(std::move(text));
}

}  // namespace ggufkit::convert_detail
