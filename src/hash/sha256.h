// SHA-256 (FIPS 180-4): chat template fingerprints in check reports (a template is identified
// by its hash, never rendered) and the sha256 manifests of gguf hash.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace ggufkit::digest {

class Sha256 {
 public:
  Sha256();
  void update(std::span<const std::byte> data);
  void update(std::string_view data) { update(std::as_bytes(std::span(data.data(), data.size()))); }
  // The digest; the object must not be updated afterwards.
  std::array<uint8_t, 32> finish();

 private:
  void compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

// Lower-case hex of the SHA-256 of `data`.
std::string sha256_hex(std::string_view data);

}  // namespace ggufkit::digest
