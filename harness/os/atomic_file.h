// Writing a file so that no reader ever sees half of it: a fresh temporary name, then a
// rename. The harness's own files (state, points.tsv, search.log, reports, caches) go
// through here.
#pragma once

#include <string>

namespace sweep {

/// `text` to `path` through a temporary file and a rename, so no reader sees half a file.
/// A path that exists and is not a regular file (a FIFO, /dev/stdout) is written in place.
/// Throws std::runtime_error naming the path and the errno text.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace sweep
