// The lattice grids of ggml's IQ2_XXS (256 points), IQ2_XS (512), IQ2_S (1024) and IQ1_S/IQ1_M
// (2048) as lookup structures for their quantizers: what ggml's iq2xs_init_impl builds.
//
// A grid point is 8 levels, each 0, 1 or 2 (the grid tables store the values they stand for). A
// group of 8 levels is packed into a 16-bit code, level i at bits 2i..2i+1. The index maps each
// code to its grid point, and each off-grid code to the grid points nearest to it: those at the
// few smallest squared distances (2 for IQ2_XXS and IQ2_XS, 1 for IQ2_S, 3 for IQ1_S and IQ1_M),
// ordered by distance, then by grid index. The quantizers keep the first of equally good
// neighbours, so this order is part of their output.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace ggufkit::quant {

// ggml's MAX / MIN macros (not std::max: the NaN and signed-zero cases differ).
template <class T>
inline T ggml_max(T a, T b) { return a > b ? a : b; }
template <class T>
inline T ggml_min(T a, T b) { return a < b ? a : b; }

enum class Iq2Grid { iq2xxs_256, iq2xs_512, iq2s_1024, iq1s_2048 };

class Iq2GridIndex {
 public:
  static constexpr int kGroupSize = 8;
  static constexpr int kLevels = 3;
  using Levels = std::array<int8_t, kGroupSize>;

  // Built on first use, once per grid (thread-safe).
  static const Iq2GridIndex& get(Iq2Grid grid);

  int size() const { return static_cast<int>(points_.size()); }
  // The grid index of a code, -1 when the code is not a grid point.
  int grid_of(uint16_t code) const { return grid_of_code_[code]; }
  // The neighbours of an off-grid code whose levels are all below kLevels (the only codes the
  // quantizers form); empty for other codes.
  std::span<const uint16_t> neighbours(uint16_t code) const {
    return {neighbours_.data() + neighbours_begin_[code], neighbours_count_[code]};
  }
  const Levels& levels(int grid_index) const { return points_[static_cast<size_t>(grid_index)]; }

  // The neighbour of an off-grid code whose point best fits scale * values[level] to the 8 values
  // x: the smallest weighted squared error, summed over i in order as weights[i] * diff * diff;
  // the first of equal errors wins and NaN never does (ggml's loop). When no error is below
  // FLT_MAX (ggml aborts then) the first neighbour. Returns its grid index. With AVX2 (run-time
  // choice) 8 neighbours are scored per vector, each lane doing the scalar operations.
  int best_neighbour(uint16_t code, const float* x, const float* weights, float scale, const float* values) const;

  static uint16_t code_of(const int8_t* levels) {
    unsigned code = 0;
    for (int i = 0; i < kGroupSize; ++i) code |= static_cast<unsigned>(levels[i]) << (2 * i);
    return static_cast<uint16_t>(code);
  }

 private:
  explicit Iq2GridIndex(Iq2Grid grid);
  void add_neighbours(uint16_t code, int distances_wanted);

  std::vector<Levels> points_;
  std::vector<int16_t> grid_of_code_;
  std::vector<uint32_t> neighbours_begin_;
  std::vector<uint16_t> neighbours_count_;
  std::vector<uint16_t> neighbours_;
  // The neighbour lists again for the vector search: per off-grid code, chunks of 8 candidates
  // holding their levels as rows (unused slots are zero; the search masks them off).
  struct alignas(64) CandidateChunk {
    std::array<std::array<int8_t, 8>, kGroupSize> level;  // [coordinate][candidate]
  };
  std::vector<CandidateChunk> chunks_;
  std::vector<uint32_t> chunks_begin_;
};

}  // namespace ggufkit::quant
