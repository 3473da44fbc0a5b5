// libFuzzer target for the checkpoint readers: SafetensorsFile::parse on arbitrary bytes,
// SafetensorsIndex::parse on the same bytes as index JSON, and parse_sentencepiece_model on them as
// a tokenizer.model. An accepted file must keep the
// promises of include/ggufkit/safetensors.h; a broken promise is printed and trapped so libFuzzer
// keeps the input.
//
// Seed mode: GGUFKIT_FUZZ_WRITE_SEEDS=DIR fuzz_safetensors writes a few small valid files
// (every dtype, metadata, empty and scalar tensors, an index) to DIR and exits. Run with
// -dict=fuzz/safetensors.dict.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "ggufkit/safetensors.h"
#include "ggufkit/sentencepiece.h"

namespace {

using namespace ggufkit;

[[noreturn]] void broken(const char* what, std::string_view name) {
  std::fprintf(stderr, "fuzz_safetensors: %s (tensor '%.*s')\n", what, static_cast<int>(name.size()), name.data());
  __builtin_trap();
}

void check_accepted(const SafetensorsFile& f, std::span<const std::byte> input) {
  if (f.data_offset() > input.size()) broken("data region starts past the input", {});
  uint64_t expected_begin = 0;
  for (const SafetensorsTensor& t : f.tensors()) {
    if (t.data_begin != expected_begin || t.data_end < t.data_begin) broken("tensors do not tile the data", t.name);
    expected_begin = t.data_end;
    if (t.data.size() != t.data_end - t.data_begin) broken("view size is not end - begin", t.name);
    if (t.data.data() != input.data() + f.data_offset() + t.data_begin) broken("view at the wrong place", t.name);
    unsigned __int128 bits = safetensors_dtype_bits(t.dtype);
    for (const int64_t d : t.shape) {
      if (d < 0) broken("negative dimension", t.name);
      bits *= static_cast<uint64_t>(d);
    }
    if (bits != static_cast<unsigned __int128>(t.data.size()) * 8) broken("size is not shape x dtype", t.name);
    if (t.n_elements() < 0) broken("negative element count", t.name);
    if (f.find(t.name) != &t) broken("find does not give the tensor back", t.name);
  }
  if (f.data_offset() + expected_begin != input.size()) broken("data region not covered exactly", {});
}

void write_file(const std::filesystem::path& path, std::string_view header, std::string_view data) {
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
  out << header << data;
}

int write_seeds(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  write_file(dir / "dtypes.safetensors",
             R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
             R"("b":{"dtype":"BF16","shape":[1,2],"data_offsets":[8,12]},"c":{"dtype":"F4","shape":[2],"data_offsets":[12,13]},)"
             R"("d":{"dtype":"I64","shape":[],"data_offsets":[13,21]},"e":{"dtype":"F8_E4M3","shape":[0,3],"data_offsets":[21,21]},)"
             R"("f":{"dtype":"BOOL","shape":[3],"data_offsets":[21,24]}}  )",
             std::string(24, '\x01'));
  write_file(dir / "empty.safetensors", "{}", "");
  std::ofstream(dir / "index.json", std::ios::binary)
      << R"({"metadata":{"total_size":8},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"x.safetensors"}})";
  // A tokenizer.model: pieces <unk> (UNKNOWN), "a" (score -1.5), a trainer_spec, a normalizer_spec.
  std::ofstream(dir / "tokenizer.model", std::ios::binary)
      << std::string("\x0a\x0e\x0a\x05<unk>\x15\x00\x00\x00\x00\x18\x02"
                     "\x0a\x08\x0a\x01" "a" "\x15\x00\x00\xc0\xbf"
                     "\x12\x02\x18\x05" "\x1a\x02\x18\x00", 34);
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("GGUFKIT_FUZZ_WRITE_SEEDS"); dir != nullptr && *dir != '\0') {
    std::exit(write_seeds(dir));
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A heap buffer of exactly the input's size: a read past the end is an ASan report.
  const std::unique_ptr<std::byte[]> copy(new std::byte[size]);
  if (size != 0) std::memcpy(copy.get(), data, size);
  const std::span<const std::byte> input(copy.get(), size);

  SafetensorsOptions options;
  options.max_header_bytes = 1 << 20;
  if (auto f = SafetensorsFile::parse(input, options)) {
    check_accepted(*f, input);
  } else {
    const Error& e = f.error();
    if (error_code_name(e.code) == "unknown_error" || e.message.empty()) broken("error without a code or reason", e.subject);
    if (e.offset > size) broken("error offset past the input", e.subject);
  }
  auto index = SafetensorsIndex::parse(std::string_view(reinterpret_cast<const char*>(copy.get()), size), options);
  if (index) {
    for (const SafetensorsIndexEntry& e : index->weight_map) {
      if (e.shard.empty() || e.shard.find('/') != std::string::npos) broken("index accepted a shard path", e.tensor);
      if (e.offset >= size) broken("index entry offset past the input", e.tensor);
    }
  } else if (index.error().offset > size) {
    broken("index error offset past the input", index.error().subject);
  }
  if (auto spm = parse_sentencepiece_model(input)) {
    if (spm->pieces.empty()) broken("sentencepiece model accepted without pieces", "");
    for (const SentencePiece& p : spm->pieces) {
      const auto type = static_cast<int>(p.type);
      if (type < 1 || type > 6) broken("sentencepiece piece of an unknown type", p.piece);
      if (p.piece.size() > size) broken("sentencepiece piece longer than the input", "");
    }
  } else if (spm.error().offset > size || spm.error().message.empty()) {
    broken("sentencepiece error offset past the input or without a reason", spm.error().subject);
  }
  return 0;
}
