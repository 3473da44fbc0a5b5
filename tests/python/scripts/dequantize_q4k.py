# Dequantizes the first Q4_K tensor of a model and saves it with numpy: a script written for
# gguf-py, run unchanged on ggufkit by test_scripts.py.
import sys

import numpy as np

import gguf
from gguf.quants import dequantize

reader = gguf.GGUFReader(sys.argv[1])
tensor = next(t for t in reader.tensors if t.tensor_type == gguf.GGMLQuantizationType.Q4_K)
values = dequantize(tensor.data, tensor.tensor_type)
print(tensor.name, values.shape, values.dtype, float(values.sum()))
np.save(sys.argv[2], values)
