#include "atomic_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "record.h"     // RecordError
#include "run_files.h"  // write_all

namespace fs = std::filesystem;

namespace sweep {

void write_file_atomically(const std::string& path, const std::string& text) {
  write_file_atomically_streamed(path, [&text](const ChunkSink& put) { put(text); });
}

void write_file_atomically_streamed(const std::string& path, const std::function<void(const ChunkSink&)>& produce) {
  // Only a regular file is replaced by a rename: renaming onto /dev/null, a FIFO or a
  // terminal (`-o /dev/stdout`) would replace the device node itself (as root: for everyone).
  std::error_code ec;
  auto st = fs::status(path, ec);
  if (!ec && fs::exists(st) && !fs::is_regular_file(st)) {
    std::ofstream out(path, std::ios::binary);
    produce([&](const std::string& chunk) {
      if (!(out << chunk)) throw std::runtime_error(path + ": write failed");
    });
    if (!out.flush()) throw std::runtime_error(path + ": write failed");
    return;
  }
  // A fresh temporary name created exclusively (mkstemp: O_EXCL), so a link planted at
  // a predictable name is never written through; every failure names the errno text.
  std::string tmp = path + ".XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) throw std::runtime_error(path + ": cannot write: " + std::strerror(errno));
  try {
    produce([&](const std::string& chunk) { write_all(fd, chunk.data(), chunk.size(), path); });
  } catch (const RecordError& e) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw std::runtime_error(e.what());  // an I/O failure of the driver's own files, not a bad record
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::fchmod(fd, 0644);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error(path + ": write failed: " + std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error(path + ": cannot replace: " + std::strerror(err));
  }
}

}  // namespace sweep
