// The digests behind gguf hash and check's chat template fingerprints (src/hash/digest.h, on
// libcrypto and libxxhash): published answers for each algorithm, whole and fed in uneven pieces,
// and llama.cpp's model id as Python's uuid.uuid5 computes it.
#include <gtest/gtest.h>

#include <string>

#include "ggufkit/hash.h"
#include "hash/digest.h"

namespace ggufkit::digest {
namespace {

std::span<const std::byte> bytes_of(std::string_view s) { return std::as_bytes(std::span(s.data(), s.size())); }

TEST(Digest, Sha256Fips180ExampleVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Digest, Sha1Fips180ExampleVectors) {
  EXPECT_EQ(digest_hex(DigestAlgorithm::sha1, bytes_of("")), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  EXPECT_EQ(digest_hex(DigestAlgorithm::sha1, bytes_of("abc")), "a9993e364706816aba3e25717850c26c9cd0d89d");
  const std::string million(1000000, 'a');
  EXPECT_EQ(digest_hex(DigestAlgorithm::sha1, bytes_of(million)), "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
}

TEST(Digest, Xxh64KnownAnswers) {
  // Published XXH64 values (seed 0, as gguf-hash and xxhsum use), every length class: < 4, 4..7,
  // 8..31, exactly one 32-byte stripe, and longer.
  const struct {
    std::string_view text;
    std::string_view want;
  } cases[] = {
      {"", "ef46db3751d8e999"},
      {"a", "d24ec4f1a98c6e5b"},
      {"abc", "44bc2cf5ad770999"},
      {"1234", "d8316e61d84f6ba4"},
      {"12345678", "d2d02f08cf7cfd4a"},
      {"123456789012345", "c377d78ade001a3c"},
      {"1234567890123456", "b61c33dc6c59f270"},
      {"1234567890123456789012345678901", "8f367cb873a5376e"},
      {"12345678901234567890123456789012", "40fd1aa52d98274c"},
      {"The quick brown fox jumps over the lazy dog", "0b242d361fda71bc"},
  };
  for (const auto& c : cases) EXPECT_EQ(digest_hex(DigestAlgorithm::xxh64, bytes_of(c.text)), c.want) << c.text;
}

TEST(Digest, UuidIsPythonsUuid5UnderLlamaCppsNamespace) {
  // str(uuid.uuid5(uuid.uuid5(uuid.NAMESPACE_URL, 'en.wikipedia.org/wiki/Llama.cpp'), text)):
  // gguf_hash.py's and gguf-hash's model id of a model whose tensors' data is `text`.
  EXPECT_EQ(digest_hex(DigestAlgorithm::uuid, bytes_of("")), "6b2748e2-363e-5825-9e7a-d9b30f33ac5b");
  EXPECT_EQ(digest_hex(DigestAlgorithm::uuid, bytes_of("abc")), "9f2200fc-45e8-5a39-9535-c3ea5c0e0cef");
}

TEST(Digest, PiecesGiveTheSameDigestAsTheWhole) {
  // Lengths around the 55/56/64-byte padding boundaries and XXH64's 32-byte stripes, fed in
  // pieces of every size 1..70.
  for (const DigestAlgorithm algorithm :
       {DigestAlgorithm::xxh64, DigestAlgorithm::sha1, DigestAlgorithm::sha256, DigestAlgorithm::uuid}) {
    for (size_t length : {31u, 32u, 55u, 56u, 63u, 64u, 65u, 119u, 120u, 200u}) {
      std::string message;
      for (size_t i = 0; i < length; ++i) message += static_cast<char>('a' + i % 26);
      const std::string whole = digest_hex(algorithm, bytes_of(message));
      for (size_t piece = 1; piece <= 70; ++piece) {
        Digester d(algorithm);
        for (size_t at = 0; at < length; at += piece) d.update(std::string_view(message).substr(at, piece));
        EXPECT_EQ(d.finish_hex(), whole) << digest_algorithm_name(algorithm) << ", length " << length << ", pieces of "
                                         << piece;
      }
      EXPECT_EQ(whole.size(), digest_length(algorithm));
    }
  }
}

}  // namespace
}  // namespace ggufkit::digest
