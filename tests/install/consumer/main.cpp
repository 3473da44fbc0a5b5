// Uses the installed ggufkit: opens a model, prints its architecture, counts, and first tensor.
#include <ggufkit/ggufkit.h>

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  auto file = ggufkit::GgufFile::open(argv[1]);
  if (!file) {
    std::cerr << argv[1] << ": " << file.error().describe() << "\n";
    return 2;
  }
  ggufkit::ModelMetadata meta(*file);
  const auto& first = file->tensors().front();
  std::cout << meta.architecture().value_or("?") << ": " << file->metadata().size() << " keys, "
            << file->tensors().size() << " tensors, first " << first.name << " "
            << ggufkit::type_name(first.type) << " " << file->tensor_data(first).size() << " bytes\n";
}
