// Writing a file so that no reader ever sees half of it: a fresh temporary name, then a
// rename. The harness's own files (state, points.tsv, search.log, reports, caches) go
// through here.
#pragma once

#include <functional>
#include <string>

namespace sweep {

/// Takes the chunks of a streamed write, in order.
using ChunkSink = std::function<void(const std::string&)>;

/// `text` to `path` through a temporary file and a rename, so no reader sees half a file.
/// A path that exists and is not a regular file (a FIFO, /dev/stdout) is written in place.
/// Throws std::runtime_error naming the path and the errno text.
void write_file_atomically(const std::string& path, const std::string& text);

/// write_file_atomically of the text that `produce` hands its sink chunk by chunk, so that
/// a file larger than memory (an export of 100,000 runs) is never held whole. What
/// `produce` throws, after the temporary file is removed, is rethrown.
void write_file_atomically_streamed(const std::string& path, const std::function<void(const ChunkSink&)>& produce);

/// Fills a fresh directory beside `path` (mkdtemp: never one planted there) by `produce`,
/// which gets the directory's path, then puts it in `path`'s place in one step: an
/// exchange of the two names (renameat2 RENAME_EXCHANGE) when `path` exists, so a reader
/// sees the whole old directory or the whole new one, never a mix, and nothing of the old
/// one stays; then the old one is removed. When `produce` throws (a full disk), the new
/// directory is removed and `path` is untouched. Throws std::runtime_error naming the path.
void replace_directory(const std::string& path, const std::function<void(const std::string& dir)>& produce);

}  // namespace sweep
