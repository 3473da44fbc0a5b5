// Helpers for the diff tests: small GGUF files built in memory with GgufBuilder, and an
// independent (whole-tensor, plain loop) computation of the data figures.
#pragma once

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ggufkit/diff.h"
#include "ggufkit/quant.h"
#include "ggufkit/reader.h"
#include "ggufkit/writer.h"

namespace ggufkit::test {

// A parsed file together with the bytes it views.
struct BuiltFile {
  std::unique_ptr<std::vector<std::byte>> bytes;
  std::unique_ptr<GgufFile> file;
  const GgufFile& operator*() const { return *file; }
  const GgufFile* operator->() const { return file.get(); }
};

inline std::vector<std::byte> encode(const GgufBuilder& b, const WriteOptions& options = {}) {
  MemorySink sink;
  auto r = b.write(sink, options);
  if (!r) throw std::runtime_error(r.error().describe());
  return std::move(sink.data);
}

inline BuiltFile build(const GgufBuilder& b) {
  BuiltFile out;
  out.bytes = std::make_unique<std::vector<std::byte>>(encode(b));
  auto f = GgufFile::parse(*out.bytes);
  if (!f) throw std::runtime_error(f.error().describe());
  out.file = std::make_unique<GgufFile>(std::move(f).value());
  return out;
}

inline std::vector<std::byte> float_bytes(const std::vector<float>& v) {
  std::vector<std::byte> out(v.size() * sizeof(float));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// Floats as `type` (quantized by the library, row by row).
inline std::vector<std::byte> encode_as(TensorType type, const std::vector<float>& v, int64_t n_per_row) {
  const auto row = row_size(type, n_per_row);
  if (!row) throw std::runtime_error("bad row");
  std::vector<std::byte> out(static_cast<size_t>(*row) * (v.size() / static_cast<size_t>(n_per_row)));
  auto r = quantize(type, v, out, n_per_row);
  if (!r) throw std::runtime_error(r.error().describe());
  return out;
}

// A smooth, sign-changing test signal.
inline std::vector<float> wave(size_t n, float phase = 0.0f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(0.37f * static_cast<float>(i) + phase) * (1.0f + static_cast<float>(i % 13) / 7.0f);
  return v;
}

inline std::vector<float> dequantized(const GgufFile& f, const TensorInfo& t) {
  std::vector<float> out(static_cast<size_t>(t.n_elements()));
  auto r = dequantize(t.type, f.tensor_data(t), out);
  if (!r) throw std::runtime_error(r.error().describe());
  return out;
}

// The figures by the textbook formulas over whole vectors, in one straight loop.
struct Reference {
  double max_abs = 0, rmse = 0, cosine = 0;
  uint64_t differing = 0;
};
inline Reference reference_figures(const std::vector<float>& a, const std::vector<float>& b) {
  Reference r;
  long double sq = 0, dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const long double x = a[i], y = b[i];
    r.differing += a[i] != b[i];
    r.max_abs = std::max(r.max_abs, static_cast<double>(std::fabs(x - y)));
    sq += (x - y) * (x - y);
    dot += x * y;
    na += x * x;
    nb += y * y;
  }
  r.rmse = static_cast<double>(std::sqrt(sq / static_cast<long double>(a.size())));
  r.cosine = static_cast<double>(dot / (std::sqrt(na) * std::sqrt(nb)));
  return r;
}

inline void expect_figures_match(const ValueStats& s, const Reference& ref) {
  EXPECT_EQ(s.differing, ref.differing);
  EXPECT_EQ(s.non_finite, 0u);
  EXPECT_DOUBLE_EQ(s.max_abs_diff, ref.max_abs);  // a max is exact whatever the order
  EXPECT_NEAR(s.rmse, ref.rmse, 1e-9 * std::max(1.0, ref.rmse));
  EXPECT_NEAR(s.cosine, ref.cosine, 1e-12);
}

}  // namespace ggufkit::test
