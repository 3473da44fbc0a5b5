// The library's verbs as functions of ggufkit._core; their Python face is python/ggufkit/verbs.py.
#include <pybind11/pybind11.h>

#include "binding.h"

namespace py = pybind11;

namespace ggufkit::python {

void register_verbs(py::module_& m) { (void)m; }

}  // namespace ggufkit::python
