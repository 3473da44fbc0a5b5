// The README's ten-line example, built with the project so that it keeps compiling.
#include <ggufkit/ggufkit.h>
#include <iostream>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  auto file = ggufkit::GgufFile::open(argv[1]);              // mapped and validated, nothing copied
  if (!file) { std::cerr << argv[1] << ": " << file.error().describe() << "\n"; return 2; }
  ggufkit::ModelMetadata meta(*file);                        // typed access to the standard keys
  std::cout << meta.architecture().value_or("?") << ", " << meta.block_count().value_or(0) << " layers\n";
  if (auto tokens = meta.tokens()) std::cout << tokens->size() << " tokens, first " << *tokens->strings().begin() << "\n";
  for (const ggufkit::TensorInfo& t : file->tensors())       // data: file->tensor_data(t), a span of the mapping
    std::cout << t.name << " " << ggufkit::type_name(t.type) << " " << file->tensor_data(t).size() << " bytes\n";
}
