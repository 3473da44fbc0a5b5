// A small .npy reader for tests: enough of the format (v1.0, little-endian, C order) to check what
// `gguf extract` writes without trusting the writer's own code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace ggufkit::test {

struct Npy {
  std::string descr;
  bool fortran_order = true;
  std::vector<int64_t> shape;
  std::vector<std::byte> data;
};

inline std::optional<Npy> parse_npy(const std::vector<std::byte>& bytes) {
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY\x01\x00", 8) != 0) return std::nullopt;
  const size_t header_len = static_cast<size_t>(bytes[8]) | static_cast<size_t>(bytes[9]) << 8;
  if ((10 + header_len) % 64 != 0 || bytes.size() < 10 + header_len) return std::nullopt;
  const std::string dict(reinterpret_cast<const char*>(bytes.data()) + 10, header_len);
  if (dict.back() != '\n') return std::nullopt;
  Npy npy;
  const size_t d = dict.find("'descr': '");
  if (d == std::string::npos) return std::nullopt;
  npy.descr = dict.substr(d + 10, dict.find('\'', d + 10) - (d + 10));
  npy.fortran_order = dict.find("'fortran_order': False") == std::string::npos;
  const size_t s = dict.find("'shape': (");
  if (s == std::string::npos) return std::nullopt;
  const size_t e = dict.find(')', s);
  std::string dims = dict.substr(s + 10, e - (s + 10));
  for (size_t at = 0; at < dims.size();) {
    const size_t comma = dims.find(',', at);
    const std::string item = dims.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (item.find_first_not_of(' ') != std::string::npos) npy.shape.push_back(std::stoll(item));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  npy.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(10 + header_len), bytes.end());
  return npy;
}

}  // namespace ggufkit::test
