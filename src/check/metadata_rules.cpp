// STUB: required metadata (issue 5, item 2).
#include "check_internal.h"

namespace ggufkit::check {

void check_required_metadata(const ModelUnderCheck& /*model*/, Findings& /*out*/) {}

}  // namespace ggufkit::check
