#include "quant/kernels.h"

namespace ggufkit::quant {

void register_iq3s_quantizer(KernelTable& /*table*/) {}

}  // namespace ggufkit::quant
