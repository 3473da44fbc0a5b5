#include "ggufkit/split.h"
