// Hugging Face safetensors files, read zero-copy (the header parsed, the tensors views into the
// mapped file). To be written: see issue 7.
#pragma once
