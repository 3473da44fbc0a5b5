// STUB: engine compatibility of tensor types (issue 5, item 7).
#include "check_internal.h"

namespace ggufkit::check {

void check_compatibility(const ModelUnderCheck& /*model*/, Findings& /*out*/) {}

}  // namespace ggufkit::check
