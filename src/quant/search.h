// Code shared by the legacy and k-quant kernels: ggml's scale searches, and block access. Each
// search picks the scale (and for the affine ones the offset) of a small group of values and the
// integer levels that go with it, with ggml's arithmetic step for step: the kernels must give
// ggml's bytes, not merely good ones.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ggufkit::quant {

// Groups below this magnitude quantize to zero.
inline constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest (ties to even) through the float magic number 1.5 * 2^23: adding it leaves the
// integer in the low mantissa bits. Exact for |value| <= 2^22 - 1; outside that range (and for
// NaN or infinity) it wraps exactly as ggml's does, which our output must reproduce.
inline int nearest_int(float value) {
  const float shifted = value + 12582912.f;
  return (std::bit_cast<int32_t>(shifted) & 0x007fffff) - 0x00400000;
}

// Symmetric levels: x ≈ scale * (levels[i] - nmax), levels in [0, 2*nmax). rmse_type picks the
// error weights when `weights` is null (1: x², 2: 1, 3: |x|, 4: sqrt|x|); 0 skips the refinement;
// a negative type averages the first least-squares scale with the starting one and stops there.
float make_qx_quants(int n, int nmax, const float* x, int8_t* levels, int rmse_type, const float* weights);

// Symmetric levels for q3_K's reference quantizer: x ≈ scale * (levels[i] - nmax), refined by
// moving single levels while the x²-weighted fit improves (when do_rmse).
float make_q3_quants(int n, int nmax, const float* x, int8_t* levels, bool do_rmse);

// An affine fit x ≈ scale * levels[i] - offset with levels in [0, nmax] and offset >= 0.
struct AffineFit {
  float scale;
  float offset;
};

inline constexpr int kMaxAffineGroup = 256;

// Tries nstep+1 scales around nmax/(max - min) and keeps the one whose weighted error (absolute
// when use_mad, else squared) is smallest. n <= kMaxAffineGroup.
AffineFit make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* levels, float rmin,
                           float rdelta, int nstep, bool use_mad);
// The same search with x² as the weights when `weights` is null, and no fit when max <= min.
AffineFit make_qkx3_quants(int n, int nmax, const float* x, const float* weights, uint8_t* levels, float rmin,
                           float rdelta, int nstep, bool use_mad);

// Non-negative levels in [0, nmax] for non-negative values (the sub-block scales of a super-block),
// weighted by `weights`: x ≈ scale * levels[i].
float make_qp_quants(int n, int nmax, const float* x, uint8_t* levels, const float* weights);

// Lane-parallel forms of the searches for the k-quants, with the scalar functions' exact results:
// `groups` independent groups of n <= 32 values, group g at x + g*n (its weights at weights + g*n,
// its levels to levels + g*n), one group per vector lane. groups is search_lanes(): 8 (AVX2) or
// 16 (AVX-512); search_lanes() is 0 when neither is available, and these must not be called.
int search_lanes();
// make_qkx2_quants (weights required) and make_qkx3_quants (null weights mean x²) per group.
void make_qkx2_quants_lanes(int groups, int n, int nmax, const float* x, const float* weights, uint8_t* levels,
                            float rmin, float rdelta, int nstep, bool use_mad, AffineFit* fits);
void make_qkx3_quants_lanes(int groups, int n, int nmax, const float* x, const float* weights, uint8_t* levels,
                            float rmin, float rdelta, int nstep, bool use_mad, AffineFit* fits);
// make_qx_quants with rmse_type 1 (null weights mean x²), scale of group g to scales[g].
void make_qx_quants_lanes(int groups, int n, int nmax, const float* x, int8_t* levels, const float* weights,
                          float* scales);
// make_q3_quants with do_rmse, scale of group g to scales[g]; groups may also be 16 here (two
// vectors of 8 side by side, faster than two calls) whenever search_lanes() is not 0.
void make_q3_quants_lanes(int groups, int n, int nmax, const float* x, int8_t* levels, float* scales);

// Block access shared by the legacy and k-quant kernels. Each format is a struct that mirrors
// ggml's block layout (halves as uint16_t) with a kElements member; blocks are copied in and out
// with memcpy since the buffers need not be aligned.
template <class Block>
Block load_block(const std::byte* src, int64_t index) {
  Block block;
  std::memcpy(&block, src + index * static_cast<int64_t>(sizeof(Block)), sizeof(Block));
  return block;
}

template <class Block>
void store_block(std::byte* dst, int64_t index, const Block& block) {
  std::memcpy(dst + index * static_cast<int64_t>(sizeof(Block)), &block, sizeof(Block));
}

// Calls decode(block, out) for each of the n / Block::kElements blocks.
template <class Block, class Decode>
void decode_blocks(const std::byte* src, float* dst, int64_t n, Decode decode) {
  for (int64_t i = 0; i < n / Block::kElements; ++i) decode(load_block<Block>(src, i), dst + i * Block::kElements);
}

// Calls encode(x, block) for each block of the n floats and stores the blocks.
template <class Block, class Encode>
void encode_blocks(const float* src, std::byte* dst, int64_t n, Encode encode) {
  for (int64_t i = 0; i < n / Block::kElements; ++i) {
    Block block{};
    encode(src + i * Block::kElements, block);
    store_block(dst, i, block);
  }
}

}  // namespace ggufkit::quant
