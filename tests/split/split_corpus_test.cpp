// merge(split(X)) == X byte for byte on every tiny-llama file of the shared corpus (22+ types).
#include <gtest/gtest.h>

#include "split_round_trip.h"

namespace {

using namespace split_test;

TEST(SplitRoundTrip, CorpusTinyLlamaFiles) {
  GGUFKIT_REQUIRE_SHARED();
  size_t files = 0;
  for (const fs::path& p : corpus_files()) {
    if (p.parent_path().filename() != "tiny-llama") continue;
    round_trip(p, {.max_bytes = 500'000}, 2);
    round_trip(p, {.max_tensors = 7}, 2);
    ++files;
  }
  EXPECT_GE(files, 20u);
}

}  // namespace
