#include "quant/kernels.h"

namespace ggufkit::quant {

void register_legacy_kernels(KernelTable& /*table*/) {}

}  // namespace ggufkit::quant
