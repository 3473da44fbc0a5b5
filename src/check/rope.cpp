// STUB: filled in by the rope pass (issue 5).
#include "check_internal.h"

namespace ggufkit::check {

void check_rope(const ModelUnderCheck& /*model*/, Findings& /*out*/) {}

}  // namespace ggufkit::check
