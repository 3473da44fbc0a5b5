#include "quant/search.h"
