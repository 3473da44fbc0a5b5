// Digester on libcrypto's EVP interface and libxxhash's streaming XXH64.
//
// libcrypto is loaded on the first SHA digest (dlopen), not linked: binding its thousands of
// symbols at every start costs every verb of the CLI about a twentieth of `gguf info`'s time on a
// large vocabulary, and only `hash`, `check`'s template fingerprints and `convert`'s
// pre-tokenizer hash use it.
#include "hash/digest.h"

#include "io/lazy_library.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <xxhash.h>

#include <array>
#include <new>
#include <stdexcept>

namespace ggufkit::digest {

namespace {

// uuid.uuid5(uuid.NAMESPACE_URL, 'en.wikipedia.org/wiki/Llama.cpp'), as gguf-hash and
// gguf_hash.py prefix the model's data with it.
constexpr std::array<uint8_t, 16> kLlamaCppNamespace = {0xef, 0x00, 0x12, 0x06, 0xda, 0xdc, 0x5f, 0x6d,
                                                        0xa1, 0x5f, 0x33, 0x59, 0xe5, 0x77, 0xd4, 0xe5};

std::string hex(std::span<const uint8_t> bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const uint8_t b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

// RFC 9562 section 5.5: the first 16 bytes of the SHA-1, version 5, variant 0b10.
std::string uuid_v5(std::span<const uint8_t> sha1) {
  std::array<uint8_t, 16> u{};
  std::copy_n(sha1.begin(), u.size(), u.begin());
  u[6] = static_cast<uint8_t>((u[6] & 0x0f) | 0x50);
  u[8] = static_cast<uint8_t>((u[8] & 0x3f) | 0x80);
  const std::string h = hex(u);
  return fmt::format("{}-{}-{}-{}-{}", h.substr(0, 8), h.substr(8, 4), h.substr(12, 4), h.substr(16, 4), h.substr(20));
}

// The EVP functions used here, resolved from libcrypto once per process (the declarations in
// <openssl/evp.h> give their types).
struct Crypto {
  decltype(&EVP_MD_CTX_new) md_ctx_new = nullptr;
  decltype(&EVP_MD_CTX_free) md_ctx_free = nullptr;
  decltype(&EVP_sha1) sha1 = nullptr;
  decltype(&EVP_sha256) sha256 = nullptr;
  decltype(&EVP_DigestInit_ex) init = nullptr;
  decltype(&EVP_DigestUpdate) update = nullptr;
  decltype(&EVP_DigestFinal_ex) final = nullptr;
};

const Crypto& crypto() {
  static const Crypto c = [] {
    static io::LazyLibrary lib(GGUFKIT_LIBCRYPTO_SONAME);
    Crypto f;
    const bool ok = lib.bind(f.md_ctx_new, "EVP_MD_CTX_new") & lib.bind(f.md_ctx_free, "EVP_MD_CTX_free") &
                    lib.bind(f.sha1, "EVP_sha1") & lib.bind(f.sha256, "EVP_sha256") &
                    lib.bind(f.init, "EVP_DigestInit_ex") & lib.bind(f.update, "EVP_DigestUpdate") &
                    lib.bind(f.final, "EVP_DigestFinal_ex");
    if (!ok) throw std::runtime_error("libcrypto: " + lib.error());
    return f;
  }();
  return c;
}

}  // namespace

struct Digester::State {
  EVP_MD_CTX* evp = nullptr;
  XXH64_state_t* xxh = nullptr;
  ~State() {
    if (evp != nullptr) crypto().md_ctx_free(evp);
    XXH64_freeState(xxh);
  }
};

Digester::Digester(DigestAlgorithm algorithm) : algorithm_(algorithm), state_(std::make_unique<State>()) {
  if (algorithm == DigestAlgorithm::xxh64) {
    state_->xxh = XXH64_createState();
    if (state_->xxh == nullptr) throw std::bad_alloc();
    XXH64_reset(state_->xxh, 0);
    return;
  }
  const Crypto& c = crypto();
  state_->evp = c.md_ctx_new();
  if (state_->evp == nullptr) throw std::bad_alloc();
  const EVP_MD* md = algorithm == DigestAlgorithm::sha256 ? c.sha256() : c.sha1();
  if (c.init(state_->evp, md, nullptr) != 1) throw std::runtime_error("libcrypto: digest init failed");
  if (algorithm == DigestAlgorithm::uuid) update(std::as_bytes(std::span(kLlamaCppNamespace)));
}

Digester::~Digester() = default;
Digester::Digester(Digester&&) noexcept = default;
Digester& Digester::operator=(Digester&&) noexcept = default;

void Digester::update(std::span<const std::byte> data) {
  if (state_->xxh != nullptr) {
    XXH64_update(state_->xxh, data.data(), data.size());
  } else if (crypto().update(state_->evp, data.data(), data.size()) != 1) {
    throw std::runtime_error("libcrypto: digest update failed");
  }
}

std::string Digester::finish_hex() {
  if (state_->xxh != nullptr) return fmt::format("{:016x}", XXH64_digest(state_->xxh));
  std::array<uint8_t, EVP_MAX_MD_SIZE> out{};
  unsigned size = 0;
  if (crypto().final(state_->evp, out.data(), &size) != 1) throw std::runtime_error("libcrypto: digest final failed");
  const std::span<const uint8_t> digest(out.data(), size);
  return algorithm_ == DigestAlgorithm::uuid ? uuid_v5(digest) : hex(digest);
}

std::string sha256_hex(std::string_view data) {
  Digester d(DigestAlgorithm::sha256);
  d.update(data);
  return d.finish_hex();
}

}  // namespace ggufkit::digest
