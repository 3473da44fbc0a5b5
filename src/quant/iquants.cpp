#include "quant/kernels.h"

namespace ggufkit::quant {

void register_iquant_kernels(KernelTable& /*table*/) {}

}  // namespace ggufkit::quant
