#include "accepted_changes.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "atomic_file.h"   // write_file_atomically
#include "config_error.h"  // ConfigError
#include "run_files.h"     // regular_file_problem
#include "text.h"          // printable

namespace fs = std::filesystem;

namespace sweep {

std::string Acceptance::line() const {
  return "accepted: " + printable(path) + " (" + std::to_string(runs) + (runs == 1 ? " run" : " runs") + ", hash " +
         from + " -> " + to + ", at " + at + ")";
}

std::vector<Acceptance> read_acceptances(const std::string& dir, std::string* problem) {
  const std::string path = dir + "/accepted-changes";
  std::vector<Acceptance> out;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return out;
  const auto refuse = [&](const std::string& why) {
    if (problem) *problem = path + ": " + why + "; no change is accepted";
    return std::vector<Acceptance>{};
  };
  if (const std::string why = regular_file_problem(path); !why.empty()) return refuse(why);
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line) || line != kAcceptedMagic)
    return refuse("not a file `sweep accept` wrote (its first line is not '" + std::string(kAcceptedMagic) + "')");
  for (int n = 2; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    std::vector<std::string> f;
    try {
      f = parse_json_string_array(line);
    } catch (const ConfigError&) {
    }
    char* end = nullptr;
    const long long runs = f.size() == 5 ? std::strtoll(f[4].c_str(), &end, 10) : -1;
    if (f.size() != 5 || f[1].empty() || f[2].empty() || f[3].empty() || runs < 0 || *end != '\0')
      return refuse("line " + std::to_string(n) + " is not [time, path, recorded hash, accepted hash, runs]");
    out.push_back({f[0], f[1], f[2], f[3], runs});
  }
  return out;
}

AcceptedHashes accepted_hashes(const std::string& dir) {
  AcceptedHashes a;
  for (const Acceptance& x : read_acceptances(dir)) a.to[{x.path, x.from}] = x.to;
  return a;
}

std::vector<std::string> acceptance_lines(const std::string& dir) {
  std::string problem;
  std::vector<std::string> out;
  for (const Acceptance& a : read_acceptances(dir, &problem)) out.push_back(a.line());
  if (!problem.empty()) out.push_back("accepted: " + printable(problem));
  return out;
}

void append_acceptances(const std::string& dir, const std::vector<Acceptance>& added) {
  std::string problem;
  read_acceptances(dir, &problem);
  if (!problem.empty()) throw ConfigError(problem + " (move it aside to accept anew)");
  std::string text = std::string(kAcceptedMagic) + "\n";
  if (std::ifstream in(dir + "/accepted-changes"); in) {
    std::string line;
    std::getline(in, line);  // the magic line, as read_acceptances found it
    while (std::getline(in, line))
      if (!line.empty()) text += line + "\n";
  }
  for (const Acceptance& a : added)
    text += json_string_array({a.at, a.path, a.from, a.to, std::to_string(a.runs)}) + "\n";
  write_file_atomically(dir + "/accepted-changes", text);
}

}  // namespace sweep
