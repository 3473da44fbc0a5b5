// STUB: filled in by the lora pass (issue 5).
#include "check_internal.h"

namespace ggufkit::check {

void check_lora(const ModelUnderCheck& /*adapter*/, const ModelUnderCheck* /*base*/, Findings& /*out*/) {}

}  // namespace ggufkit::check
