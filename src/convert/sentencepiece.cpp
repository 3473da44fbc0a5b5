// SentencePiece ModelProto reader: a minimal protobuf wire-format decoder over a byte span.
// Fields read (sentencepiece_model.proto): ModelProto.pieces = 1 (SentencePiece: piece = 1,
// score = 2, type = 3), ModelProto.normalizer_spec = 3 (add_dummy_prefix = 3); everything else is
// skipped by its wire type.
#include "ggufkit/sentencepiece.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <bit>
#include <cstring>
#include <optional>
#include <string_view>

namespace ggufkit {

namespace {

constexpr size_t kMaxPieces = size_t{1} << 24;

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kStartGroup = 3, kEndGroup = 4, kFixed32 = 5 };

// A cursor over one message's bytes; `base` is the message's offset in the file.
class Reader {
 public:
  Reader(std::span<const std::byte> bytes, uint64_t base) : bytes_(bytes), base_(base) {}

  bool done() const { return at_ >= bytes_.size(); }
  uint64_t offset() const { return base_ + at_; }

  Expected<uint64_t> varint(std::string_view what) {
    const uint64_t start = offset();
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at_ >= bytes_.size()) return fail(start, fmt::format("{}: the varint is cut off by the end", what));
      const auto b = static_cast<uint8_t>(bytes_[at_++]);
      value |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return value;
    }
    return fail(start, fmt::format("{}: a varint longer than 10 bytes", what));
  }

  Expected<std::span<const std::byte>> take(uint64_t n, std::string_view what) {
    if (n > bytes_.size() - at_) {
      return fail(offset(), fmt::format("{}: {} bytes, but only {} remain", what, n, bytes_.size() - at_));
    }
    const auto out = bytes_.subspan(at_, static_cast<size_t>(n));
    at_ += static_cast<size_t>(n);
    return out;
  }

  // Skips a field of `wire` type whose tag has just been read.
  Expected<void> skip(uint32_t wire, std::string_view what) {
    switch (wire) {
      case kVarint: {
        auto v = varint(what);
        if (!v) return std::move(v).error();
        return {};
      }
      case kFixed64: {
        auto s = take(8, what);
        if (!s) return std::move(s).error();
        return {};
      }
      case kFixed32: {
        auto s = take(4, what);
        if (!s) return std::move(s).error();
        return {};
      }
      case kLengthDelimited: {
        auto n = varint(what);
        if (!n) return std::move(n).error();
        auto s = take(*n, what);
        if (!s) return std::move(s).error();
        return {};
      }
      default:
        return fail(offset(), fmt::format("{}: wire type {} (groups are not used by SentencePiece)", what, wire));
    }
  }

  static Error fail(uint64_t offset, std::string message) {
    return make_error(ErrorCode::bad_header, offset, "tokenizer.model", std::move(message));
  }

 private:
  std::span<const std::byte> bytes_;
  uint64_t base_ = 0;
  size_t at_ = 0;
};

struct Tag {
  uint32_t field = 0;
  uint32_t wire = 0;
};

Expected<Tag> read_tag(Reader& r, std::string_view what) {
  const uint64_t start = r.offset();
  auto key = r.varint(what);
  if (!key) return std::move(key).error();
  if ((*key >> 3) == 0 || (*key >> 3) > 0x1FFFFFFF) return Reader::fail(start, fmt::format("{}: field number 0 or too large", what));
  return Tag{static_cast<uint32_t>(*key >> 3), static_cast<uint32_t>(*key & 7)};
}

Expected<void> expect_wire(const Tag& tag, uint32_t wire, uint64_t offset, std::string_view what) {
  if (tag.wire == wire) return {};
  return Reader::fail(offset, fmt::format("{}: wire type {} where {} is expected", what, tag.wire, wire));
}

Expected<SentencePiece> read_piece(std::span<const std::byte> bytes, uint64_t base, size_t id) {
  const std::string what = fmt::format("pieces[{}]", id);
  Reader r(bytes, base);
  SentencePiece p;
  while (!r.done()) {
    const uint64_t at = r.offset();
    auto tag = read_tag(r, what);
    if (!tag) return std::move(tag).error();
    if (tag->field == 1) {  // piece
      if (auto ok = expect_wire(*tag, kLengthDelimited, at, what + ".piece"); !ok) return std::move(ok).error();
      auto n = r.varint(what + ".piece");
      if (!n) return std::move(n).error();
      const uint64_t text_at = r.offset();
      auto text = r.take(*n, what + ".piece");
      if (!text) return std::move(text).error();
      p.piece.assign(reinterpret_cast<const char*>(text->data()), text->size());
      if (!simdjson::validate_utf8(p.piece.data(), p.piece.size())) return Reader::fail(text_at, what + ".piece is not UTF-8");
    } else if (tag->field == 2) {  // score
      if (auto ok = expect_wire(*tag, kFixed32, at, what + ".score"); !ok) return std::move(ok).error();
      auto raw = r.take(4, what + ".score");
      if (!raw) return std::move(raw).error();
      uint32_t bits = 0;
      std::memcpy(&bits, raw->data(), 4);  // little-endian on the wire, as on the hosts we build for
      p.score = std::bit_cast<float>(bits);
    } else if (tag->field == 3) {  // type
      if (auto ok = expect_wire(*tag, kVarint, at, what + ".type"); !ok) return std::move(ok).error();
      auto v = r.varint(what + ".type");
      if (!v) return std::move(v).error();
      if (*v < 1 || *v > 6) return Reader::fail(at, fmt::format("{}.type is {} (1 to 6: NORMAL ... BYTE)", what, *v));
      p.type = static_cast<SentencePieceType>(*v);
    } else if (auto ok = r.skip(tag->wire, what); !ok) {
      return std::move(ok).error();
    }
  }
  return p;
}

Expected<void> read_normalizer(std::span<const std::byte> bytes, uint64_t base, SentencePieceModel& model) {
  Reader r(bytes, base);
  while (!r.done()) {
    const uint64_t at = r.offset();
    auto tag = read_tag(r, "normalizer_spec");
    if (!tag) return std::move(tag).error();
    if (tag->field == 3) {  // add_dummy_prefix
      if (auto ok = expect_wire(*tag, kVarint, at, "normalizer_spec.add_dummy_prefix"); !ok) return std::move(ok).error();
      auto v = r.varint("normalizer_spec.add_dummy_prefix");
      if (!v) return std::move(v).error();
      model.add_dummy_prefix = *v != 0;
    } else if (auto ok = r.skip(tag->wire, "normalizer_spec"); !ok) {
      return std::move(ok).error();
    }
  }
  return {};
}

}  // namespace

Expected<SentencePieceModel> parse_sentencepiece_model(std::span<const std::byte> bytes) {
  SentencePieceModel model;
  Reader r(bytes, 0);
  while (!r.done()) {
    const uint64_t at = r.offset();
    auto tag = read_tag(r, "ModelProto");
    if (!tag) return std::move(tag).error();
    if (tag->field == 1 || tag->field == 3) {
      const std::string what = tag->field == 1 ? fmt::format("pieces[{}]", model.pieces.size()) : "normalizer_spec";
      if (auto ok = expect_wire(*tag, kLengthDelimited, at, what); !ok) return std::move(ok).error();
      auto n = r.varint(what);
      if (!n) return std::move(n).error();
      const uint64_t body_at = r.offset();
      auto body = r.take(*n, what);
      if (!body) return std::move(body).error();
      if (tag->field == 3) {
        if (auto ok = read_normalizer(*body, body_at, model); !ok) return std::move(ok).error();
        continue;
      }
      if (model.pieces.size() >= kMaxPieces) return Reader::fail(at, fmt::format("more than {} pieces", kMaxPieces));
      auto piece = read_piece(*body, body_at, model.pieces.size());
      if (!piece) return std::move(piece).error();
      model.pieces.push_back(std::move(*piece));
    } else if (auto ok = r.skip(tag->wire, "ModelProto"); !ok) {
      return std::move(ok).error();
    }
  }
  if (model.pieces.empty()) return Reader::fail(0, "no pieces: not a SentencePiece model");
  return model;
}

}  // namespace ggufkit
