// The numeric tables of ggml's IQ and FP4 formats (grids, sign tables, value tables), as data.
#pragma once

#include <cstdint>

namespace ggufkit::quant::tables {
#include "quant/tables.inc"
}  // namespace ggufkit::quant::tables
