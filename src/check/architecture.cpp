// STUB: filled in by the architecture pass (issue 5).
#include "check_internal.h"

namespace ggufkit::check {

void check_architecture(const ModelUnderCheck& /*model*/, Findings& /*out*/) {}

}  // namespace ggufkit::check
