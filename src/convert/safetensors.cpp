// Safetensors reader (to be written: issue 7).
#include "ggufkit/safetensors.h"
