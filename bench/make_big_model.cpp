// make_big_model OUT GIB [--dense]: a llama-shaped GGUF with GIB GiB of f16 tensor data, for the
// edit benchmark. The data is zero and written as holes (a sparse file, no disk used) unless --dense,
// which fills it with a non-zero pattern so that every byte must really be copied.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ggufkit/writer.h"

namespace {

using namespace ggufkit;

// Writes to a file; chunks of zeros become holes.
class SparseFileSink final : public ByteSink {
 public:
  explicit SparseFileSink(int fd) : fd_(fd) {}
  Expected<void> write(std::span<const std::byte> bytes) override {
    const bool zero = std::all_of(bytes.begin(), bytes.end(), [](std::byte b) { return b == std::byte{0}; });
    if (zero && bytes.size() >= 4096) {
      if (::lseek(fd_, static_cast<off_t>(bytes.size()), SEEK_CUR) < 0) return fail();
    } else {
      for (size_t done = 0; done < bytes.size();) {
        const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
        if (n < 0) return fail();
        done += static_cast<size_t>(n);
      }
    }
    size_ += bytes.size();
    return {};
  }
  bool finish() { return ::ftruncate(fd_, static_cast<off_t>(size_)) == 0 && ::close(fd_) == 0; }

 private:
  static Error fail() { return make_error(ErrorCode::io_error, 0, {}, std::strerror(errno)); }
  int fd_;
  uint64_t size_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: make_big_model OUT GIB [--dense]\n");
    return 2;
  }
  const std::string out = argv[1];
  const double gib = std::atof(argv[2]);
  const bool dense = argc > 3 && std::string(argv[3]) == "--dense";
  GgufBuilder b;
  (void)b.set("general.architecture", MetadataValue::string("llama"));
  (void)b.set("general.name", MetadataValue::string("ggufkit edit benchmark"));
  (void)b.set("llama.context_length", MetadataValue::of(uint32_t{4096}));
  (void)b.set("tokenizer.chat_template", MetadataValue::string("{% for m in messages %}{{ m.content }}{% endfor %}"));
  const int64_t n_tensors = std::max<int64_t>(1, static_cast<int64_t>(gib * 32));  // 32 MiB each
  const int64_t shape[] = {4096, 4096};
  for (int64_t i = 0; i < n_tensors; ++i) {
    auto r = b.add_tensor("blk." + std::to_string(i) + ".ffn.weight", TensorType::F16, shape,
                          TensorProducer([dense](uint64_t offset, std::span<std::byte> chunk) -> Expected<void> {
                            if (!dense) {
                              std::fill(chunk.begin(), chunk.end(), std::byte{0});
                            } else {
                              for (size_t k = 0; k < chunk.size(); ++k) chunk[k] = static_cast<std::byte>(((offset + k) * 2654435761u) >> 13 | 1);
                            }
                            return {};
                          }));
    if (!r) return 2;
  }
  const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    std::perror(out.c_str());
    return 2;
  }
  SparseFileSink sink(fd);
  if (auto r = b.write(sink); !r || !sink.finish()) {
    std::fprintf(stderr, "cannot write %s\n", out.c_str());
    return 2;
  }
  return 0;
}
