#include "quant/iq2_grid.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <climits>
#include <cmath>

#include "quant/simd.h"
#include "quant/tables.h"

namespace ggufkit::quant {
namespace {

constexpr int kCodeCount = 1 << 16;

std::span<const uint64_t> grid_table(Iq2Grid grid) {
  switch (grid) {
    case Iq2Grid::iq2xxs_256: return tables::iq2xxs_grid;
    case Iq2Grid::iq2xs_512: return tables::iq2xs_grid;
    case Iq2Grid::iq2s_1024: return tables::iq2s_grid;
    case Iq2Grid::iq1s_2048: return tables::iq1s_grid;
  }
  return {};
}

// How many distinct distances a neighbour list covers (ggml's nwant).
int distances_wanted(Iq2Grid grid) {
  switch (grid) {
    case Iq2Grid::iq2s_1024: return 1;
    case Iq2Grid::iq1s_2048: return 3;
    default: return 2;
  }
}

// The value a table byte stands for: the IQ1 grid stores -1, 0, 1 as signed bytes, the IQ2
// grids store their three magnitudes as unsigned bytes.
int byte_value(Iq2Grid grid, uint64_t point, int i) {
  const auto byte = static_cast<uint8_t>(point >> (8 * i));
  return grid == Iq2Grid::iq1s_2048 ? static_cast<int8_t>(byte) : byte;
}

}  // namespace

Iq2GridIndex::Iq2GridIndex(Iq2Grid grid)
    : grid_of_code_(kCodeCount, -1), neighbours_begin_(kCodeCount, 0), neighbours_count_(kCodeCount, 0) {
  const std::span<const uint64_t> table = grid_table(grid);
  // The three values of the table, ascending, are levels 0, 1, 2.
  std::vector<int> values;
  for (uint64_t point : table) {
    for (int i = 0; i < kGroupSize; ++i) values.push_back(byte_value(grid, point, i));
  }
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  points_.resize(table.size());
  for (size_t j = 0; j < table.size(); ++j) {
    for (int i = 0; i < kGroupSize; ++i) {
      const auto level = std::lower_bound(values.begin(), values.end(), byte_value(grid, table[j], i)) - values.begin();
      points_[j][static_cast<size_t>(i)] = static_cast<int8_t>(level);
    }
    grid_of_code_[code_of(points_[j].data())] = static_cast<int16_t>(j);
  }
  // ggml lists neighbours for every off-grid code up to 0xAAAA + 1, but the quantizers clamp levels
  // to 0..2, so only codes over those levels are ever looked up.
  const int wanted = distances_wanted(grid);
  Levels levels{};
  for (int c = 0; c < 6561; ++c) {  // 3^8 level combinations
    int rest = c;
    for (auto& l : levels) {
      l = static_cast<int8_t>(rest % kLevels);
      rest /= kLevels;
    }
    const uint16_t code = code_of(levels.data());
    if (grid_of_code_[code] < 0) add_neighbours(code, wanted);
  }
  chunks_begin_.assign(kCodeCount, 0);
  for (int code = 0; code < kCodeCount; ++code) {
    const auto list = neighbours(static_cast<uint16_t>(code));
    chunks_begin_[static_cast<size_t>(code)] = static_cast<uint32_t>(chunks_.size());
    for (size_t c = 0; c < list.size(); c += 8) {
      CandidateChunk chunk{};
      for (size_t slot = 0; slot < 8 && c + slot < list.size(); ++slot) {
        for (size_t i = 0; i < kGroupSize; ++i) chunk.level[i][slot] = points_[list[c + slot]][i];
      }
      chunks_.push_back(chunk);
    }
  }
}

void Iq2GridIndex::add_neighbours(uint16_t code, int distances_wanted) {
  Levels position{};
  for (int i = 0; i < kGroupSize; ++i) position[static_cast<size_t>(i)] = static_cast<int8_t>((code >> (2 * i)) & 3);
  // Squared distances in level units (ggml measures in units of half a level: 4 times these,
  // the same order).
  std::vector<int> distance(points_.size());
  for (size_t j = 0; j < points_.size(); ++j) {
    int d2 = 0;
    for (size_t i = 0; i < kGroupSize; ++i) d2 += (points_[j][i] - position[i]) * (points_[j][i] - position[i]);
    distance[j] = d2;
  }
  // The smallest distinct distances, ascending (INT_MAX: fewer distinct distances exist).
  std::array<int, 3> nearest{};
  nearest.fill(INT_MAX);
  for (int d2 : distance) {
    for (int r = 0; r < distances_wanted; ++r) {
      if (d2 == nearest[static_cast<size_t>(r)]) break;
      if (d2 < nearest[static_cast<size_t>(r)]) {
        for (int s = distances_wanted - 1; s > r; --s) nearest[static_cast<size_t>(s)] = nearest[static_cast<size_t>(s - 1)];
        nearest[static_cast<size_t>(r)] = d2;
        break;
      }
    }
  }
  neighbours_begin_[code] = static_cast<uint32_t>(neighbours_.size());
  for (int r = 0; r < distances_wanted && nearest[static_cast<size_t>(r)] != INT_MAX; ++r) {
    for (size_t j = 0; j < points_.size(); ++j) {
      if (distance[j] == nearest[static_cast<size_t>(r)]) neighbours_.push_back(static_cast<uint16_t>(j));
    }
  }
  neighbours_count_[code] = static_cast<uint16_t>(neighbours_.size() - neighbours_begin_[code]);
}

namespace {

int best_neighbour_scalar(std::span<const uint16_t> candidates, const std::vector<Iq2GridIndex::Levels>& points,
                          const float* x, const float* weights, float scale, const float* values) {
  float best_d2 = FLT_MAX;
  int best_index = candidates[0];
  for (const uint16_t candidate : candidates) {
    const auto& point = points[candidate];
    float d2 = 0;
    for (size_t i = 0; i < Iq2GridIndex::kGroupSize; ++i) {
      const float q = values[point[i]];
      const float diff = scale * q - x[i];
      d2 += weights[i] * diff * diff;
    }
    if (d2 < best_d2) {
      best_d2 = d2;
      best_index = candidate;
    }
  }
  return best_index;
}

#if GGUFKIT_QUANT_X86

// Lists longer than this take the scalar search (the longest, of the 512-point grid, has 292).
constexpr int kVectorNeighbourLimit = 320;

// Lane c of chunk v scores candidate 8v + c with the scalar operations in the scalar order. The
// scalar loop keeps the first error strictly below all before it and below FLT_MAX: the first
// candidate holding the smallest such error. NaN errors never win.
template <class Chunk>
GGUFKIT_TARGET_AVX2 __attribute__((noinline)) int best_neighbour_avx2(const Chunk* chunks,
                                                                      std::span<const uint16_t> candidates,
                                                                      const float* x, const float* weights,
                                                                      float scale, const float* values) {
  const int count = static_cast<int>(candidates.size());
  const __m256 table = _mm256_setr_ps(values[0], values[1], values[2], 0.0f, values[0], values[1], values[2], 0.0f);
  const __m256 vscale = _mm256_set1_ps(scale);
  const __m256 infinity = _mm256_set1_ps(INFINITY);
  const __m256 float_max = _mm256_set1_ps(FLT_MAX);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256 vx[Iq2GridIndex::kGroupSize], vw[Iq2GridIndex::kGroupSize];
  for (int i = 0; i < Iq2GridIndex::kGroupSize; ++i) {
    vx[i] = _mm256_set1_ps(x[i]);
    vw[i] = _mm256_set1_ps(weights[i]);
  }
  const int vectors = (count + 7) / 8;
  __m256 keys[kVectorNeighbourLimit / 8];
  __m256 smallest = infinity;
  for (int v = 0; v < vectors; ++v) {
    __m256 d2 = _mm256_setzero_ps();
    for (int i = 0; i < Iq2GridIndex::kGroupSize; ++i) {
      const __m128i l8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(chunks[v].level[static_cast<size_t>(i)].data()));
      const __m256 q = _mm256_permutevar_ps(table, _mm256_cvtepi8_epi32(l8));
      const __m256 diff = _mm256_sub_ps(_mm256_mul_ps(vscale, q), vx[i]);
      d2 = _mm256_add_ps(d2, _mm256_mul_ps(_mm256_mul_ps(vw[i], diff), diff));
    }
    const __m256 in_list = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(count - 8 * v), lane));
    const __m256 eligible = _mm256_and_ps(in_list, _mm256_cmp_ps(d2, float_max, _CMP_LT_OQ));
    keys[v] = _mm256_blendv_ps(infinity, d2, eligible);
    smallest = _mm256_min_ps(smallest, keys[v]);
  }
  smallest = _mm256_min_ps(smallest, _mm256_permute2f128_ps(smallest, smallest, 1));
  smallest = _mm256_min_ps(smallest, _mm256_permute_ps(smallest, _MM_SHUFFLE(1, 0, 3, 2)));
  smallest = _mm256_min_ps(smallest, _mm256_permute_ps(smallest, _MM_SHUFFLE(2, 3, 0, 1)));
  int best = candidates[0];  // no error below FLT_MAX
  if (_mm256_movemask_ps(_mm256_cmp_ps(smallest, infinity, _CMP_LT_OQ)) != 0) {
    for (int v = 0; v < vectors; ++v) {
      const auto hits = static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(keys[v], smallest, _CMP_EQ_OQ)));
      if (hits != 0) {
        best = candidates[static_cast<size_t>(8 * v + std::countr_zero(hits))];
        break;
      }
    }
  }
  _mm256_zeroupper();  // the callers are baseline (SSE) code
  return best;
}

#endif  // GGUFKIT_QUANT_X86

}  // namespace

int Iq2GridIndex::best_neighbour(uint16_t code, const float* x, const float* weights, float scale,
                                 const float* values) const {
  const auto candidates = neighbours(code);
  if (candidates.empty()) return 0;  // not reached: every off-grid code over levels 0..2 has some
#if GGUFKIT_QUANT_X86
  if (simd::has_avx2() && candidates.size() <= static_cast<size_t>(kVectorNeighbourLimit)) {
    return best_neighbour_avx2(chunks_.data() + chunks_begin_[code], candidates, x, weights, scale, values);
  }
#endif
  return best_neighbour_scalar(candidates, points_, x, weights, scale, values);
}

const Iq2GridIndex& Iq2GridIndex::get(Iq2Grid grid) {
  // One function-local static per grid: each is built on its first use, once, thread-safely.
  switch (grid) {
    case Iq2Grid::iq2xxs_256: {
      static const Iq2GridIndex index(Iq2Grid::iq2xxs_256);
      return index;
    }
    case Iq2Grid::iq2xs_512: {
      static const Iq2GridIndex index(Iq2Grid::iq2xs_512);
      return index;
    }
    case Iq2Grid::iq2s_1024: {
      static const Iq2GridIndex index(Iq2Grid::iq2s_1024);
      return index;
    }
    case Iq2Grid::iq1s_2048: break;
  }
  static const Iq2GridIndex index(Iq2Grid::iq1s_2048);
  return index;
}

}  // namespace ggufkit::quant
