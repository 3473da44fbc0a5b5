// Umbrella header.
#pragma once

#include "ggufkit/conventions.h"
#include "ggufkit/error.h"
#include "ggufkit/json.h"
#include "ggufkit/mapped_file.h"
#include "ggufkit/reader.h"
#include "ggufkit/summary.h"
#include "ggufkit/tensor_types.h"
#include "ggufkit/value.h"
#include "ggufkit/writer.h"
