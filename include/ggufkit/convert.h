// gguf convert: a Hugging Face checkpoint directory (config.json, *.safetensors, tokenizer files)
// to one GGUF file, as llama.cpp's convert_hf_to_gguf.py writes it, streamed tensor by tensor.
// To be designed (issue 7).
#pragma once
