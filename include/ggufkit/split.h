// Split models: shards written and read as llama.cpp's gguf-split does.
#pragma once
