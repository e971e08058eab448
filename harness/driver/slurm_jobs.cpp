#include "slurm_jobs.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace sweep {
namespace {
const char* kMagic = "sweep-slurm-jobs 1";
}  // namespace

void append_slurm_job(const std::string& dir, const SlurmJobLine& line) {
  const std::string path = dir + "/slurm-jobs";
  // O_NOFOLLOW: never through a link planted in the sweep directory.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  std::string text;
  if (::lseek(fd, 0, SEEK_END) == 0) text = std::string(kMagic) + "\n";
  text += line.job + " " + std::to_string(line.throttle) + " " + line.script;
  for (const auto& r : line.runs) text += " " + r;
  text += "\n";
  // One write: a reader sees the line whole or, after a crash mid-write, without its newline.
  const ssize_t n = ::write(fd, text.data(), text.size());
  const int err = errno;
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (n != ssize_t(text.size()))
    throw std::runtime_error(path + ": cannot append: " + (n < 0 ? std::strerror(err) : "short write"));
  if (!synced) throw std::runtime_error(path + ": cannot fsync: " + std::strerror(errno));
}

std::vector<SlurmJobLine> read_slurm_jobs(const std::string& dir) {
  std::vector<SlurmJobLine> out;
  std::ifstream in(dir + "/slurm-jobs", std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  const size_t end = text.rfind('\n');
  if (end == std::string::npos) return out;
  std::stringstream ss(text.substr(0, end + 1));
  std::string l;
  if (!std::getline(ss, l) || l != kMagic) return out;
  while (std::getline(ss, l)) {
    std::stringstream ls(l);
    SlurmJobLine j;
    if (!(ls >> j.job >> j.throttle >> j.script)) continue;
    for (std::string id; ls >> id;) j.runs.push_back(id);
    out.push_back(std::move(j));
  }
  return out;
}

std::map<std::string, SlurmTaskOf> latest_slurm_tasks(const std::vector<SlurmJobLine>& lines) {
  std::map<std::string, SlurmTaskOf> out;
  for (const auto& l : lines)
    for (size_t i = 0; i < l.runs.size(); ++i) out[l.runs[i]] = {l.job, int(i), l.throttle};
  return out;
}

}  // namespace sweep
