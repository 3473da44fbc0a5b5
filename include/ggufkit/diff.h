// Comparing two GGUF files (metadata, tensor directory, tensor data).
#pragma once
