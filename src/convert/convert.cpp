// gguf convert (to be written: issue 7).
#include "ggufkit/convert.h"
