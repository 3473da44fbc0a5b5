#include "quant/iq2_grid.h"

#include <algorithm>
#include <climits>

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
