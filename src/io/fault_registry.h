// What a SIGBUS handler needs to know, kept where a signal handler can read it: the mapped files
// (address range and path) and the temporary files of unfinished AtomicFiles. Fixed-size tables of
// slots claimed and released with atomics; a process with more live entries than slots just has
// the extra ones left out (the handler then names no file, or leaves that temporary behind).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ggufkit::io {

// Each returns a slot to release, or -1 when the table is full.
int register_mapping(const void* begin, size_t size, std::string_view path);
void release_mapping(int slot);
int register_temporary(std::string_view path);
void release_temporary(int slot);

// zero_fill_on_bus_error's count of faults turned into zeros, and the file of the last one (the
// check AtomicFile::commit makes before it renames).
uint64_t bus_error_count();
std::string last_bus_error_file();

}  // namespace ggufkit::io
