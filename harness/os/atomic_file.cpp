#include "atomic_file.h"

#include <fcntl.h>  // AT_FDCWD
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>  // renameat2, RENAME_EXCHANGE
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

void replace_directory(const std::string& path, const std::function<void(const std::string& dir)>& produce) {
  const fs::path target = fs::path(path).lexically_normal();
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmp = (parent / ("." + target.filename().string() + ".new-XXXXXX")).string();
  if (!::mkdtemp(tmp.data())) throw std::runtime_error(path + ": cannot write beside it: " + std::strerror(errno));
  std::error_code ec;
  try {
    produce(tmp);
    ::chmod(tmp.c_str(), 0755);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {  // nothing there yet: the new one takes the name
    if (::rename(tmp.c_str(), path.c_str()) == 0) return;
    const int err = errno;
    fs::remove_all(tmp, ec);
    throw std::runtime_error(path + ": cannot create: " + std::strerror(err));
  }
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, path.c_str(), RENAME_EXCHANGE) != 0) {
    // A file system without the exchange: the old one aside, then the new one in place.
    const std::string old = tmp + ".old";
    const bool aside = ::rename(path.c_str(), old.c_str()) == 0;
    if (!aside || ::rename(tmp.c_str(), path.c_str()) != 0) {
      const int err = errno;
      if (aside) ::rename(old.c_str(), path.c_str());  // the old one back in its place
      fs::remove_all(tmp, ec);
      throw std::runtime_error(path + ": cannot replace: " + std::strerror(err));
    }
    tmp = old;
  }
  fs::remove_all(tmp, ec);  // the old directory, now under the temporary name
}

}  // namespace sweep
