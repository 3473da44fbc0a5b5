// XXH64 (Yann Collet's xxHash, 64-bit variant, seed 0 by default): the fast digest of gguf hash
// manifests, written from the algorithm's public specification.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace ggufkit::digest {

uint64_t xxh64(std::span<const std::byte> data, uint64_t seed = 0);

}  // namespace ggufkit::digest
