#include "output.h"

#include "ggufkit/json.h"

#include <fmt/format.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

namespace gguf_cli {

void report_error(std::string_view file, const ggufkit::Error& error) {
  // The library's file when it names one (a shard of a split model, a checkpoint's JSON file).
  const std::string_view shown = error.file.empty() ? file : std::string_view(error.file);
  fmt::print(stderr, "gguf: {}: {} [{}]\n", shown, error.describe(), ggufkit::error_code_name(error.code));
}

std::optional<ggufkit::GgufFile> open_or_report(const std::string& path) {
  auto f = ggufkit::GgufFile::open(path);
  if (!f) {
    report_error(path, f.error());
    return std::nullopt;
  }
  return std::move(f).value();
}

std::atomic<bool>& interrupt_flag() {
  static std::atomic<bool> flag{false};
  return flag;
}

namespace {
extern "C" void on_interrupt(int) { interrupt_flag().store(true); }
}  // namespace

void watch_interrupts() {
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
}

LongRun::LongRun(std::string verb, std::vector<uint64_t> tensor_bytes)
    : verb_(std::move(verb)), start_(std::chrono::steady_clock::now()) {
  cumulative_.reserve(tensor_bytes.size());
  for (uint64_t b : tensor_bytes) cumulative_.push_back(total_ += b);
  watch_interrupts();
}

void LongRun::tensor_done(size_t done, size_t all, std::string_view name, std::string_view type) const {
  const double fraction = total_ != 0 && done >= 1 && done <= cumulative_.size()
                              ? static_cast<double>(cumulative_[done - 1]) / static_cast<double>(total_)
                              : 1.0;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double left = fraction > 0 ? elapsed * (1 - fraction) / fraction : 0;
  fmt::print(stderr, "[{:>4}/{}] {:5.1f}%  {:>6.1f}s left  {} -> {}\n", done, all, 100 * fraction, left, name, type);
}

int LongRun::finish(const ggufkit::Expected<void>& result, std::string_view output, std::string_view error_file) const {
  if (result) return kOk;
  if (result.error().code == ggufkit::ErrorCode::cancelled || interrupt_flag().load()) {
    fmt::print(stderr, "gguf: {}: interrupted; {} was not written\n", verb_, output);
    return kInterrupted;
  }
  report_error(error_file, result.error());
  return kUsageOrIoError;
}

std::string value_type_text(const ggufkit::ValueView& v) {
  if (const auto arr = v.as_array()) return fmt::format("{}[{}]", ggufkit::value_type_name(arr->element_type()), arr->size());
  return std::string(ggufkit::value_type_name(v.type()));
}

std::string value_text(const ggufkit::ValueView& v, const ValueTextLimits& limits) {
  if (v.type() == ggufkit::ValueType::String) {
    return fmt::format("\"{}\"", shorten_for_display(v.as_string().value_or(""), limits.string_chars));
  }
  if (const auto arr = v.as_array()) {
    if (limits.elements == 0) return fmt::format("[{} {}]", arr->size(), ggufkit::value_type_name(arr->element_type()));
    const ValueTextLimits inner{limits.element_string_chars, limits.elements, limits.element_string_chars};
    std::string out = "[";
    uint64_t shown = 0;
    for (const ggufkit::ValueView e : arr->values()) {
      if (shown == limits.elements) {
        out += fmt::format(", … {} more", arr->size() - shown);
        break;
      }
      if (shown++ > 0) out += ", ";
      out += value_text(e, inner);
    }
    return out + "]";
  }
  std::string out;
  ggufkit::json::append_value(out, v);
  return out;
}

int write_result(std::string_view text) {
  errno = 0;
  if (std::fwrite(text.data(), 1, text.size(), stdout) == text.size() && std::fflush(stdout) == 0) return kOk;
  const int err = errno;
  fmt::print(stderr, "gguf: cannot write the output: {}\n", err != 0 ? std::strerror(err) : "write error");
  return kUsageOrIoError;
}

std::string plural(uint64_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

std::string human_bytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024.0 && unit < 5) {
    v /= 1024.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.2f} {}", v, kUnits[unit]);
}

std::string human_count(uint64_t n) {
  if (n < 1000) return fmt::format("{}", n);
  static constexpr const char* kUnits[] = {"K", "M", "B", "T"};
  double v = static_cast<double>(n);
  int unit = -1;
  while (v >= 1000.0 && unit < 3) {
    v /= 1000.0;
    ++unit;
  }
  return fmt::format("{:.2f}{}", v, kUnits[unit]);
}

std::string shorten_for_display(std::string_view s, size_t max) {
  std::string out;
  size_t shown = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (shown >= max) {
      out += "…";
      break;
    }
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
    if ((c & 0xC0) != 0x80) ++shown;  // count characters, not continuation bytes
  }
  return out;
}

}  // namespace gguf_cli
