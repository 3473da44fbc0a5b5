// The source of ggufkit_test_pch (tests/CMakeLists.txt): empty, it only carries the precompiled header.
