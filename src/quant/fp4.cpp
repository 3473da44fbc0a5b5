#include "quant/kernels.h"

namespace ggufkit::quant {

void register_fp4_kernels(KernelTable& /*table*/) {}

}  // namespace ggufkit::quant
