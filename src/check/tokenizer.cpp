// STUB: filled in by the tokenizer pass (issue 5).
#include "check_internal.h"

namespace ggufkit::check {

void check_tokenizer(const ModelUnderCheck& /*model*/, Findings& /*out*/) {}

}  // namespace ggufkit::check
