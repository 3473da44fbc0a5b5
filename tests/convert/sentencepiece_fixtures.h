// A tiny protobuf encoder for SentencePiece ModelProtos in tests (the reader is tested against
// spm_train's real models elsewhere; this builds the cases spm_train never writes).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ggufkit::test::spm {

class Proto {
 public:
  // A ModelProto.pieces entry: piece = 1, score = 2 (fixed32), type = 3 (omitted when 0).
  Proto& piece(const std::string& text, float score, uint32_t type) {
    std::vector<uint8_t> body;
    tag(body, 1, 2);
    varint(body, text.size());
    body.insert(body.end(), text.begin(), text.end());
    tag(body, 2, 5);
    const auto bits = std::bit_cast<uint32_t>(score);
    for (int i = 0; i < 4; ++i) body.push_back(static_cast<uint8_t>(bits >> (8 * i)));
    if (type != 0) {
      tag(body, 3, 0);
      varint(body, type);
    }
    message(1, body);
    return *this;
  }
  // A trainer_spec (field 2) with a varint and a string inside: what the reader skips.
  Proto& unknown_field() {
    std::vector<uint8_t> body;
    tag(body, 3, 0);
    varint(body, 300);
    tag(body, 1, 2);
    varint(body, 3);
    body.insert(body.end(), {'a', 'b', 'c'});
    message(2, body);
    return *this;
  }
  // trainer_spec (field 2) with byte_fallback = 35: SentencePiece itself refuses byte pieces without it.
  Proto& byte_fallback() {
    std::vector<uint8_t> body;
    tag(body, 35, 0);
    varint(body, 1);
    message(2, body);
    return *this;
  }
  // normalizer_spec (field 3): name = 1 and add_dummy_prefix = 3.
  Proto& normalizer(bool add_dummy_prefix) {
    std::vector<uint8_t> body;
    tag(body, 1, 2);
    varint(body, 8);
    body.insert(body.end(), {'i', 'd', 'e', 'n', 't', 'i', 't', 'y'});
    tag(body, 3, 0);
    varint(body, add_dummy_prefix ? 1 : 0);
    message(3, body);
    return *this;
  }
  std::vector<std::byte> bytes() const {
    std::vector<std::byte> out(bytes_.size());
    for (size_t i = 0; i < bytes_.size(); ++i) out[i] = static_cast<std::byte>(bytes_[i]);
    return out;
  }

 private:
  static void varint(std::vector<uint8_t>& out, uint64_t v) {
    while (v >= 0x80) {
      out.push_back(static_cast<uint8_t>(v | 0x80));
      v >>= 7;
    }
    out.push_back(static_cast<uint8_t>(v));
  }
  static void tag(std::vector<uint8_t>& out, uint32_t field, uint32_t wire) { varint(out, (field << 3) | wire); }
  void message(uint32_t field, const std::vector<uint8_t>& body) {
    tag(bytes_, field, 2);
    varint(bytes_, body.size());
    bytes_.insert(bytes_.end(), body.begin(), body.end());
  }
  std::vector<uint8_t> bytes_;
};

}  // namespace ggufkit::test::spm
