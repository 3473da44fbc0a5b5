// libFuzzer target for the reader: GgufFile::parse on arbitrary bytes, then everything a consumer
// does with an accepted file (tests/robustness/exercise.h, shared with the robustness tests), and
// the importance-matrix parser (GGUF and legacy .dat forms) on the same bytes.
// Any inconsistency is printed and turned into a crash so libFuzzer keeps the input.
//
// Seed mode (used by scripts/run-fuzz.sh):
//   GGUFKIT_FUZZ_WRITE_SEEDS=DIR fuzz_reader MODEL.gguf...
// writes a small *valid* copy of each model to DIR and exits: every array cut to its first 64
// elements, every tensor cut to one block of its type. libFuzzer truncates inputs to -max_len
// (64 KiB), so whole models would only ever reach it as broken prefixes, never as files that
// parse; these copies give it complete files with every tensor type of the corpus. One more seed,
// built from scratch, holds every value type, nested arrays and a v2 header; a third is the same
// file big-endian.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "../tests/robustness/exercise.h"
#include "ggufkit/imatrix.h"

namespace {

using namespace ggufkit;

constexpr uint64_t kSeedArrayElements = 64;

MetadataValue shrunk_value(const ValueView& value) {
  const auto arr = value.as_array();
  if (!arr || arr->size() <= kSeedArrayElements) return MetadataValue::copy_of(value);
  std::vector<MetadataValue> kept;
  for (const ValueView e : arr->values()) {
    if (kept.size() == kSeedArrayElements) break;
    kept.push_back(shrunk_value(e));
  }
  auto shrunk = MetadataValue::array_of(arr->element_type(), kept);
  return shrunk ? std::move(shrunk).value() : MetadataValue::copy_of(value);
}

bool write_shrunk_copy(const std::filesystem::path& source, const std::filesystem::path& dir) {
  auto file = GgufFile::open(source);
  if (!file) {
    std::fprintf(stderr, "fuzz_reader: %s: %s\n", source.c_str(), file.error().describe().c_str());
    return false;
  }
  GgufBuilder b;
  if (auto r = b.set_version(file->version()); !r) return false;
  for (const KeyValue& kv : file->metadata()) {
    if (auto r = b.set(kv.key, shrunk_value(kv.value)); !r) return false;
  }
  std::vector<std::vector<std::byte>> zero_blocks;  // for tensors smaller than one block
  for (const TensorInfo& t : file->tensors()) {
    const TypeTraits& traits = type_traits(t.type);
    std::vector<int64_t> shape(std::max<uint32_t>(t.n_dims, 1), 1);
    shape[0] = traits.block_size;
    std::span<const std::byte> block = file->tensor_data(t);
    if (block.size() >= traits.block_bytes) {
      block = block.first(traits.block_bytes);
    } else {
      zero_blocks.emplace_back(traits.block_bytes);
      block = zero_blocks.back();
    }
    if (auto r = b.add_tensor(t.name, t.type, shape, block); !r) {
      std::fprintf(stderr, "fuzz_reader: %s: %s\n", source.c_str(), r.error().describe().c_str());
      return false;
    }
  }
  const auto out = dir / (source.stem().string() + ".small.gguf");
  WriteOptions options;
  options.sync = false;
  if (auto r = b.write_file(out, options); !r) {
    std::fprintf(stderr, "fuzz_reader: %s: %s\n", out.c_str(), r.error().describe().c_str());
    return false;
  }
  return true;
}

// Every value type, arrays of each, arrays of arrays, an odd alignment and three tensors.
bool write_value_types_seed(const std::filesystem::path& dir, uint32_t version, ByteOrder order = ByteOrder::little) {
  GgufBuilder b;
  bool ok = b.set_version(version).has_value();
  const std::vector<int8_t> i8{-128, 0, 127};
  const std::vector<uint16_t> u16{0, 65535};
  const std::vector<int64_t> i64{INT64_MIN, -1, INT64_MAX};
  const std::vector<double> f64{0.5, -0.0, 1e300};
  const std::vector<bool> flags{true, false, true};
  const std::vector<std::string> words{"a", "", "\xc3\xa9t\xc3\xa9", "\xff"};
  const std::vector<uint8_t> inner_a{1, 2};
  const std::vector<uint8_t> inner_b{3};
  const MetadataValue inner[] = {MetadataValue::array(inner_a), MetadataValue::array(inner_b)};
  auto nested = MetadataValue::array_of(ValueType::Array, inner);
  ok &= nested.has_value();
  for (auto r : {b.set("general.architecture", MetadataValue::string("llama")), b.set_alignment(64),
                 b.set("t.u8", MetadataValue::of(uint8_t{200})), b.set("t.i8", MetadataValue::of(int8_t{-3})),
                 b.set("t.u16", MetadataValue::of(uint16_t{65535})), b.set("t.i16", MetadataValue::of(int16_t{-300})),
                 b.set("t.u32", MetadataValue::of(uint32_t{4000000000u})), b.set("t.i32", MetadataValue::of(int32_t{-7})),
                 b.set("t.f32", MetadataValue::of(1.5f)), b.set("t.bool", MetadataValue::of(true)),
                 b.set("t.u64", MetadataValue::of(uint64_t{UINT64_MAX})), b.set("t.i64", MetadataValue::of(int64_t{-1})),
                 b.set("t.f64", MetadataValue::of(2.25)), b.set("t.str", MetadataValue::string("hello")),
                 b.set("t.arr.i8", MetadataValue::array(i8)), b.set("t.arr.u16", MetadataValue::array(u16)),
                 b.set("t.arr.i64", MetadataValue::array(i64)), b.set("t.arr.f64", MetadataValue::array(f64)),
                 b.set("t.arr.bool", MetadataValue::array(flags)), b.set("t.arr.str", MetadataValue::string_array(words)),
                 b.set("llama.attention.head_count", MetadataValue::array(std::vector<int32_t>{4, 4})),
                 b.set("t.arr.empty", MetadataValue::array(std::vector<float>{}))}) {
    ok &= r.has_value();
  }
  if (nested) ok &= b.set("t.arr.nested", *nested).has_value();
  const std::vector<std::byte> f32_data(4 * 4 * 2);
  const std::vector<std::byte> q8_data(34);
  const int64_t f32_shape[] = {4, 2};
  const int64_t q8_shape[] = {32};
  const int64_t empty_shape[] = {0, 3};
  ok &= b.add_tensor("a.weight", TensorType::F32, f32_shape, f32_data).has_value();
  ok &= b.add_tensor("b.weight", TensorType::Q8_0, q8_shape, q8_data).has_value();
  ok &= b.add_tensor("empty", TensorType::F16, empty_shape, std::span<const std::byte>()).has_value();
  WriteOptions options;
  options.sync = false;
  options.byte_order = order;  // the tensor bytes are zeros: the same in either order
  const std::string name = fmt::format("value-types-v{}{}.gguf", version, order == ByteOrder::big ? "-be" : "");
  ok &= ok && b.write_file(dir / name, options).has_value();
  if (!ok) std::fprintf(stderr, "fuzz_reader: could not build the value-types seed\n");
  return ok;
}

int write_seeds(const std::filesystem::path& dir, int argc, char** argv) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  bool ok = write_value_types_seed(dir, 3) && write_value_types_seed(dir, 2) &&
            write_value_types_seed(dir, 3, ByteOrder::big);
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] != '-') ok &= write_shrunk_copy(argv[i], dir);
  }
  return ok ? 0 : 1;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  if (const char* dir = std::getenv("GGUFKIT_FUZZ_WRITE_SEEDS"); dir != nullptr && *dir != '\0') {
    std::exit(write_seeds(dir, *argc, *argv));
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A fresh heap buffer of exactly the input's size: a read one byte past the end is an ASan
  // report, not a silent read of libFuzzer's own buffer.
  const std::unique_ptr<std::byte[]> copy(new std::byte[size]);
  if (size != 0) std::memcpy(copy.get(), data, size);
  const std::span<const std::byte> input(copy.get(), size);

  // The importance-matrix parser takes the same bytes: a GGUF one, or its own legacy form. It must
  // only ever return an error.
  (void)ggufkit::parse_importance_matrix(input);

  ggufkit::robust::Findings findings;
  ggufkit::robust::parse_and_exercise(findings, input);
  if (!findings.ok()) {
    std::fprintf(stderr, "fuzz_reader: %zu inconsistencies on a %zu byte input:\n%s", findings.count(), size,
                 findings.report().c_str());
    __builtin_trap();
  }
  return 0;
}
