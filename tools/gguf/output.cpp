#include "output.h"

#include <fmt/format.h>

namespace gguf_cli {

void report_error(std::string_view file, const ggufkit::Error& error) {
  fmt::print(stderr, "gguf: {}: {} [{}]\n", file, error.describe(), ggufkit::error_code_name(error.code));
}

std::optional<ggufkit::GgufFile> open_or_report(const std::string& path) {
  auto f = ggufkit::GgufFile::open(path);
  if (!f) {
    report_error(path, f.error());
    return std::nullopt;
  }
  return std::move(f).value();
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
