# `import gguf` gives ggufkit: gguf-py's scripts run unchanged on ggufkit with this directory first
# on PYTHONPATH (tests/python/test_scripts.py). The submodules are aliased too, so that
# `from gguf.constants import ...` finds ggufkit's, not a second copy.
import sys

import ggufkit

for _name in ("constants", "quants", "reader", "writer", "errors"):
    sys.modules[f"gguf.{_name}"] = getattr(ggufkit, _name, None) or __import__(f"ggufkit.{_name}", fromlist=["_"])
sys.modules["gguf.gguf_reader"] = ggufkit.reader
sys.modules["gguf.gguf_writer"] = ggufkit.writer
sys.modules[__name__] = ggufkit
