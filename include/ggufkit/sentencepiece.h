// SentencePiece models (a checkpoint's tokenizer.model): the pieces of a serialized ModelProto
// (sentencepiece_model.proto), read by a small bounds-checked protobuf reader. Only what a GGUF
// vocabulary needs is kept: each piece's text, score and type, in id order, and the normalizer's
// add_dummy_prefix. The file is untrusted input: every length and tag is checked against the bytes
// that remain, and an error names the record and the byte offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ggufkit/error.h"

namespace ggufkit {

// ModelProto.SentencePiece.Type; the values are gguf-py's SentencePieceTokenTypes too.
enum class SentencePieceType : uint8_t { normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };

struct SentencePiece {
  std::string piece;
  float score = 0.0f;  // the proto's default
  SentencePieceType type = SentencePieceType::normal;
};

struct SentencePieceModel {
  std::vector<SentencePiece> pieces;  // by id
  bool add_dummy_prefix = true;       // NormalizerSpec.add_dummy_prefix (default true)
};

// Parses a serialized ModelProto. Refused: malformed protobuf (a truncated varint or field, a
// length past the end, a group, a wire type a field cannot have), a piece that is not UTF-8, a type
// outside 1..6, a model without pieces or with more than 2^24.
Expected<SentencePieceModel> parse_sentencepiece_model(std::span<const std::byte> bytes);

}  // namespace ggufkit
