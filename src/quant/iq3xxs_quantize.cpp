// IQ3_XXS quantization (not yet: the type stays dequantize-only).
#include "quant/kernels.h"

namespace ggufkit::quant {

void register_iq3xxs_quantizer(KernelTable&) {}

}  // namespace ggufkit::quant
