// IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S and IQ1_M quantization (not yet: the types stay dequantize-only).
#include "quant/kernels.h"

namespace ggufkit::quant {

void register_iq2_quantizers(KernelTable&) {}

}  // namespace ggufkit::quant
