// Damaged copies of valid files: random bit flips, and length/count/offset/type fields overwritten
// with boundary values. Each copy is either rejected with a proper error or accepted, and then
// everything a consumer does with it works and agrees with itself (exercise.h). Seeds are fixed,
// so a failure reproduces; the damaged input is also saved for the fuzzer.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <map>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "exercise.h"
#include "robust_support.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;
namespace t = ggufkit::test;
// Inputs up to this size also go through gguf check (check_bytes) after every mutation.
constexpr size_t kCheckedInputBytes = size_t{1} << 20;
using namespace ggufkit;
using namespace ggufkit::robust;

// A valid file in an exact-size heap buffer (so ASan sees a read one byte past the end), damaged
// in place and restored after each check.
class Target {
 public:
  Target(std::string name, const std::vector<std::byte>& bytes)
      : name_(std::move(name)), size_(bytes.size()), data_(new std::byte[bytes.size()]), original_(bytes) {
    std::memcpy(data_.get(), bytes.data(), size_);
    const auto parsed = GgufFile::parse(span());
    if (parsed) layout_ = layout_of(span(), *parsed);
  }

  const std::string& name() const { return name_; }
  std::span<std::byte> span() { return {data_.get(), size_}; }
  size_t size() const { return size_; }
  const std::optional<GgufLayout>& layout() const { return layout_; }
  uint64_t header_end() const { return layout_ ? layout_->data_offset : size_; }

  void write_le(uint64_t at, uint32_t width, uint64_t value) {
    for (uint32_t i = 0; i < width && at + i < size_; ++i) {
      data_[static_cast<size_t>(at + i)] = static_cast<std::byte>((value >> (8 * i)) & 0xFF);
    }
  }
  uint64_t read_le(uint64_t at, uint32_t width) const {
    uint64_t v = 0;
    for (uint32_t i = 0; i < width && at + i < size_; ++i) {
      v |= static_cast<uint64_t>(data_[static_cast<size_t>(at + i)]) << (8 * i);
    }
    return v;
  }
  void restore(uint64_t at, uint64_t n) {
    const size_t end = static_cast<size_t>(std::min<uint64_t>(at + n, size_));
    std::memcpy(data_.get() + at, original_.data() + at, end - static_cast<size_t>(at));
  }

 private:
  std::string name_;
  size_t size_;
  std::unique_ptr<std::byte[]> data_;
  std::vector<std::byte> original_;
  std::optional<GgufLayout> layout_;
};

// Checks damaged inputs one by one and keeps the tally.
class Checker {
 public:
  explicit Checker(std::string suite) : suite_(std::move(suite)) {}

  void check(Target& target, const std::string& what) {
    const std::span<const std::byte> input = target.span();
    const auto parsed = parse_clock_.time([&] { return GgufFile::parse(input); });
    Findings findings;
    if (parsed) {
      ++accepted_;
      exercise_clock_.time([&] {
        exercise_file(findings, *parsed, input);
        return 0;
      });
    } else {
      ++rejected_;
      ++codes_[std::string(error_code_name(parsed.error().code))];
      check_parse_error(findings, parsed.error(), input.size());
    }
    check_option_monotonicity(findings, input, parsed.has_value());
    // gguf check's mode too, on the inputs small enough to run its passes thousands of times.
    if (input.size() <= kCheckedInputBytes) check_collecting_problems(findings, input, parsed.has_value());
    if (!findings.ok()) {
      ++failures_;
      if (failures_ <= 5) {
        if (saved_dir_.empty()) saved_dir_ = t::temp_dir("robust-" + suite_);
        const fs::path saved = saved_dir_ / fmt::format("failure-{}.gguf", failures_);
        t::write_bytes(saved, std::vector<std::byte>(input.begin(), input.end()));
        ADD_FAILURE() << target.name() << ", " << what << " (input saved as " << saved.string() << "):\n"
                      << findings.report();
      }
    }
  }

  // Every check passed, both outcomes were seen, and nothing was slow.
  void expect_all_good() const {
    EXPECT_EQ(failures_, 0u) << failures_ << " of " << accepted_ + rejected_ << " damaged inputs misbehaved";
    EXPECT_GT(rejected_, 0u) << "no damaged input was rejected: the damage did not reach the header";
    EXPECT_LT(parse_clock_.slowest_seconds(), kSlowestParseSeconds) << "slowest parse";
    EXPECT_LT(exercise_clock_.slowest_seconds(), 5 * kSlowestParseSeconds) << "slowest exercise of an accepted input";
    std::string codes;
    for (const auto& [code, n] : codes_) codes += fmt::format(" {}={}", code, n);
    std::printf("[ %s ] %llu accepted, %llu rejected:%s; slowest parse %.1f ms, slowest exercise %.1f ms\n",
                suite_.c_str(), static_cast<unsigned long long>(accepted_), static_cast<unsigned long long>(rejected_),
                codes.c_str(), parse_clock_.slowest_seconds() * 1e3, exercise_clock_.slowest_seconds() * 1e3);
  }
  uint64_t accepted() const { return accepted_; }

 private:
  std::string suite_;
  fs::path saved_dir_;  // where failing inputs go, made on the first failure
  SlowestClock parse_clock_;
  SlowestClock exercise_clock_;
  uint64_t accepted_ = 0;
  uint64_t rejected_ = 0;
  uint64_t failures_ = 0;
  std::map<std::string, uint64_t> codes_;
};

// Where a flip lands: mostly in the header, where every byte means something to the parser; now
// and then anywhere, tensor data included.
uint64_t pick_position(std::mt19937_64& rng, const Target& target) {
  const uint64_t span = rng() % 8 == 0 ? target.size() : target.header_end();
  return rng() % std::max<uint64_t>(span, 1);
}

void random_bit_flips(Target& target, Checker& checker, uint64_t seed, int copies) {
  std::mt19937_64 rng(seed);
  for (int copy = 0; copy < copies; ++copy) {
    const int flips = 1 + static_cast<int>(rng() % 8);
    std::array<uint64_t, 8> at{};
    std::array<uint8_t, 8> mask{};
    for (int i = 0; i < flips; ++i) {
      at[i] = pick_position(rng, target);
      mask[i] = static_cast<uint8_t>(1u << (rng() % 8));
      target.span()[static_cast<size_t>(at[i])] ^= std::byte{mask[i]};
    }
    checker.check(target, fmt::format("seed {} copy {}: {} flips, first at byte {}", seed, copy, flips, at[0]));
    for (int i = flips - 1; i >= 0; --i) target.span()[static_cast<size_t>(at[i])] ^= std::byte{mask[i]};
  }
}

// 64-bit values at the edges: zero, one, the reader's own limits (2^30), sign and width edges.
constexpr std::array<uint64_t, 9> kBoundary64 = {
    0, 1, uint64_t{1} << 30, (uint64_t{1} << 30) + 1, uint64_t{1} << 31, uint64_t{1} << 32,
    (uint64_t{1} << 63) - 1, uint64_t{1} << 63, ~uint64_t{0}};
// 32-bit ones, with the value and tensor type id limits.
constexpr std::array<uint64_t, 10> kBoundary32 = {0, 1, 12, 13, 42, 43, uint64_t{1} << 31, (uint64_t{1} << 31) - 1,
                                                  0xFFFFFFFFu, 0x03000000u};

// Every field the walker found, overwritten with each boundary value and with its own value +-1.
// (Every `stride`th field under sanitizers, see Budget.)
void every_field_at_boundaries(Target& target, Checker& checker, uint64_t stride) {
  ASSERT_TRUE(target.layout());
  const auto& fields = target.layout()->fields;
  for (size_t i = 0; i < fields.size(); i += static_cast<size_t>(stride)) {
    const Field& field = fields[i];
    const uint64_t old = target.read_le(field.offset, field.width);
    std::vector<uint64_t> values = {old + 1, old - 1};
    if (field.width == 8) values.insert(values.end(), kBoundary64.begin(), kBoundary64.end());
    if (field.width == 4) values.insert(values.end(), kBoundary32.begin(), kBoundary32.end());
    if (field.width < 4) values.insert(values.end(), {0, 1, 0x7F, 0x80, 0xFF});
    for (const uint64_t v : values) {
      target.write_le(field.offset, field.width, v);
      checker.check(target, fmt::format("field at {} (kind {}, {} bytes) set to {:#x}", field.offset,
                                        static_cast<int>(field.kind), field.width, v));
      target.restore(field.offset, field.width);
    }
  }
}

// A sample of the fields (for files with hundreds of thousands of string lengths).
void sampled_fields_at_boundaries(Target& target, Checker& checker, uint64_t seed, int count) {
  ASSERT_TRUE(target.layout());
  const auto& fields = target.layout()->fields;
  std::mt19937_64 rng(seed);
  for (int i = 0; i < count; ++i) {
    // Half the time one of the first 64 fields (header, counts, the first keys), which decide most.
    const size_t idx = static_cast<size_t>(rng() % 2 == 0 ? rng() % std::min<size_t>(64, fields.size())
                                                          : rng() % fields.size());
    const Field& field = fields[idx];
    const uint64_t old = target.read_le(field.offset, field.width);
    uint64_t v = 0;
    switch (rng() % 3) {
      case 0: v = old + (rng() % 2 == 0 ? 1 : ~uint64_t{0}); break;
      default: v = field.width == 8 ? kBoundary64[rng() % kBoundary64.size()] : kBoundary32[rng() % kBoundary32.size()];
    }
    target.write_le(field.offset, field.width, v);
    checker.check(target, fmt::format("seed {} #{}: field at {} set to {:#x}", seed, i, field.offset, v));
    target.restore(field.offset, field.width);
  }
}

// 8 bytes at any position (not only where a field starts) overwritten with a boundary value.
void random_overwrites(Target& target, Checker& checker, uint64_t seed, int count) {
  std::mt19937_64 rng(seed);
  for (int i = 0; i < count; ++i) {
    const uint64_t at = pick_position(rng, target);
    const uint64_t v = kBoundary64[rng() % kBoundary64.size()];
    target.write_le(at, 8, v);
    checker.check(target, fmt::format("seed {} #{}: 8 bytes at {} set to {:#x}", seed, i, at, v));
    target.restore(at, 8);
  }
}

Target sample_target() { return Target("sample", t::read_bytes(t::sample_model())); }

TEST(Mutation, SampleRandomBitFlips) {
  Target target = sample_target();
  ASSERT_TRUE(target.layout());
  Checker checker("sample-bit-flips");
  random_bit_flips(target, checker, 0x5EED0001, kBudget.sample_bit_flips);
  checker.expect_all_good();
  EXPECT_GT(checker.accepted(), 0u) << "flips in token text and tensor data leave a valid file";
}

TEST(Mutation, SampleEveryFieldAtBoundaryValues) {
  Target target = sample_target();
  Checker checker("sample-fields");
  every_field_at_boundaries(target, checker, kBudget.sample_field_stride);
  checker.expect_all_good();
}

TEST(Mutation, SampleRandomBoundaryOverwrites) {
  Target target = sample_target();
  Checker checker("sample-overwrites");
  random_overwrites(target, checker, 0x5EED0002, kBudget.sample_overwrites);
  checker.expect_all_good();
}

// Two corpus files: a mixed-quantization model and a vocabulary without tensors, with fewer copies
// than the sample (Budget), and fewer of the vocabulary: most of its bytes are token text, and each
// accepted copy means checking 30k tokens and parsing a megabyte of JSON.
struct CorpusTarget {
  const char* path;
  int copies;
};
const CorpusTarget kCorpusTargets[] = {
    {"tiny-llama/tiny-llama-q4_k_m.gguf", kBudget.corpus_mutations},
    {"vocab/ggml-vocab-bert-bge.gguf", kBudget.corpus_mutations * 2 / 5},
};
void PrintTo(const CorpusTarget& target, std::ostream* os) { *os << target.path; }

class CorpusMutation : public testing::TestWithParam<CorpusTarget> {
 protected:
  std::optional<Target> load() {
    const fs::path path = *t::shared_dir() / "corpus" / GetParam().path;
    if (!fs::exists(path)) return std::nullopt;
    return Target(GetParam().path, t::read_bytes(path));
  }
  std::string suite(const char* kind) const { return fs::path(GetParam().path).stem().string() + kind; }
};

TEST_P(CorpusMutation, RandomBitFlips) {
  GGUFKIT_REQUIRE_SHARED();
  auto target = load();
  if (!target) GTEST_SKIP() << GetParam().path << " is not in the shared corpus";
  ASSERT_TRUE(target->layout());
  Checker checker(suite("-bit-flips"));
  random_bit_flips(*target, checker, 0x5EED0003, GetParam().copies);
  checker.expect_all_good();
}

TEST_P(CorpusMutation, FieldsAtBoundaryValues) {
  GGUFKIT_REQUIRE_SHARED();
  auto target = load();
  if (!target) GTEST_SKIP() << GetParam().path << " is not in the shared corpus";
  Checker checker(suite("-fields"));
  sampled_fields_at_boundaries(*target, checker, 0x5EED0004, GetParam().copies);
  random_overwrites(*target, checker, 0x5EED0005, GetParam().copies / 2);
  checker.expect_all_good();
}

INSTANTIATE_TEST_SUITE_P(Shared, CorpusMutation, testing::ValuesIn(kCorpusTargets),
                         [](const testing::TestParamInfo<CorpusTarget>& param_info) {
                           std::string s = fs::path(param_info.param.path).stem().string();
                           for (char& c : s) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return s;
                         });

}  // namespace
