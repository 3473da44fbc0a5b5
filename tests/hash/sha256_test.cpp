// The SHA-256 behind the chat template fingerprints (src/check/sha256.h), on the FIPS 180-4
// example vectors and the NIST long-message vector, whole and fed in uneven pieces.
#include <gtest/gtest.h>

#include <string>

#include "hash/sha256.h"

namespace ggufkit::digest {
namespace {

std::string hex(const std::array<uint8_t, 32>& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const uint8_t b : digest) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

TEST(Sha256, Fips180ExampleVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
                       "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256, OneMillionAs) {
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PiecesGiveTheSameDigestAsTheWhole) {
  // Lengths around the 55/56/64-byte padding boundaries, fed in pieces of every size 1..70.
  for (size_t length : {55u, 56u, 63u, 64u, 65u, 119u, 120u, 200u}) {
    std::string message;
    for (size_t i = 0; i < length; ++i) message += static_cast<char>('a' + i % 26);
    const std::string whole = sha256_hex(message);
    for (size_t piece = 1; piece <= 70; ++piece) {
      Sha256 hash;
      for (size_t at = 0; at < length; at += piece) hash.update(std::string_view(message).substr(at, piece));
      EXPECT_EQ(hex(hash.finish()), whole) << "length " << length << ", pieces of " << piece;
    }
  }
}

}  // namespace
}  // namespace ggufkit::digest
