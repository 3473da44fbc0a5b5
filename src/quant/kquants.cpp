#include "quant/kernels.h"

namespace ggufkit::quant {

void register_kquant_kernels(KernelTable& /*table*/) {}

}  // namespace ggufkit::quant
