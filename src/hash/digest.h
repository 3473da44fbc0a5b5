// Streaming digests on well-kept libraries: SHA-1 and SHA-256 from OpenSSL's libcrypto (SHA-NI
// where the CPU has it), XXH64 from libxxhash. Used by gguf hash's manifests and by the check
// reports' chat template fingerprints (a template is identified by its hash, never rendered).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ggufkit/hash.h"

namespace ggufkit::digest {

// One running digest. DigestAlgorithm::uuid is llama.cpp's model id: the SHA-1 of its namespace
// (ef001206-dadc-5f6d-a15f-3359e577d4e5) and then the data, as a version 5 UUID.
class Digester {
 public:
  explicit Digester(DigestAlgorithm algorithm);
  ~Digester();
  Digester(Digester&&) noexcept;
  Digester& operator=(Digester&&) noexcept;
  Digester(const Digester&) = delete;
  Digester& operator=(const Digester&) = delete;

  void update(std::span<const std::byte> data);
  void update(std::string_view data) { update(std::as_bytes(std::span(data.data(), data.size()))); }
  // The digest as digest_hex spells it; the object must not be used afterwards.
  std::string finish_hex();

 private:
  struct State;
  DigestAlgorithm algorithm_;
  std::unique_ptr<State> state_;
};

// Lower-case hex of the SHA-256 of `data`.
std::string sha256_hex(std::string_view data);

}  // namespace ggufkit::digest
