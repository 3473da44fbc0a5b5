// Shared scale searches of the legacy and k-quant quantizers (filled in with the k-quant kernels).
#pragma once
