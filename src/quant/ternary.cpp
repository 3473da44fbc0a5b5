#include "quant/kernels.h"

namespace ggufkit::quant {

void register_ternary_kernels(KernelTable& /*table*/) {}

}  // namespace ggufkit::quant
