// Umbrella header.
#pragma once

#include "ggufkit/conventions.h"
#include "ggufkit/diff.h"
#include "ggufkit/edit.h"
#include "ggufkit/endian.h"
#include "ggufkit/error.h"
#include "ggufkit/extract.h"
#include "ggufkit/json.h"
#include "ggufkit/mapped_file.h"
#include "ggufkit/quant.h"
#include "ggufkit/quantize.h"
#include "ggufkit/reader.h"
#include "ggufkit/split.h"
#include "ggufkit/summary.h"
#include "ggufkit/tensor_types.h"
#include "ggufkit/value.h"
#include "ggufkit/writer.h"
