#include "ggufkit/diff.h"
