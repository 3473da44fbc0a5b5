# Writes a minimal model with GGUFWriter (one F32 tensor, custom alignment 64): a script written
# for gguf-py, run unchanged on ggufkit by test_scripts.py.
import sys

import numpy as np

import gguf

writer = gguf.GGUFWriter(sys.argv[1], "llama")
writer.add_name("minimal")
writer.add_custom_alignment(64)
writer.add_block_count(1)
writer.add_uint32("answer", 42)
writer.add_string("greeting", "hello")
writer.add_array("primes", [2, 3, 5, 7])
writer.add_tensor("tensor1", np.arange(12, dtype=np.float32).reshape(3, 4))
writer.write_header_to_file()
writer.write_kv_data_to_file()
writer.write_tensors_to_file()
writer.close()
print("wrote", sys.argv[1])
