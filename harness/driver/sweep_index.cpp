#include "sweep_index.h"

#include <algorithm>  // sort
#include <cerrno>
#include <cstdio>  // fprintf
#include <cstdlib>
#include <fstream>
#include <iterator>  // istreambuf_iterator
#include <stdexcept>
#include <vector>

#include "atomic_file.h"    // write_file_atomically
#include "checksum.h"       // run_id_of_config (XXH3-64 as hex): the index's checksum
#include "record.h"         // Record
#include "report_format.h"  // g17: the shortest text that reads back as the same double
#include "run_figures.h"    // run_figures
#include "run_health.h"     // run_health, health_names, throughput_peer
#include "sweep_records.h"  // record_content_problem
#include "text.h"           // split

namespace sweep {
namespace {

/// The environment keys data_changed() reads.
constexpr const char* kInputKeys[] = {"program",   "program.digest", "program.files",  "program.trees", "program.data",
                                      "data.file", "data.hash",      "data.eval_file", "data.eval_hash"};
/// Fields of an entry line before its inputs.
constexpr size_t kFixedFields = 19;
/// An index larger than this is not read (a sweep of 100,000 runs writes ~30 MB).
constexpr std::streamoff kMaxIndexBytes = std::streamoff(1) << 30;

std::string escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        out += c;
    }
  }
  return out;
}

bool unescape(const std::string& s, std::string* out) {
  out->clear();
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      *out += s[i];
      continue;
    }
    if (++i == s.size()) return false;
    switch (s[i]) {
      case '\\':
        *out += '\\';
        break;
      case 't':
        *out += '\t';
        break;
      case 'n':
        *out += '\n';
        break;
      case 'r':
        *out += '\r';
        break;
      default:
        return false;
    }
  }
  return true;
}

bool parse_int(const std::string& s, int64_t* v) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(s.c_str(), &end, 10);
  if (*end != '\0' || errno == ERANGE) return false;
  *v = x;
  return true;
}

bool parse_uint(const std::string& s, uint64_t* v) {
  if (s.empty() || s[0] == '-') return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long x = std::strtoull(s.c_str(), &end, 10);
  if (*end != '\0' || errno == ERANGE) return false;
  *v = x;
  return true;
}

bool parse_double(const std::string& s, double* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  *v = std::strtod(s.c_str(), &end);
  return *end == '\0';
}

std::string entry_line(const std::string& id, const IndexedRecord& e) {
  std::string line = "R";
  for (const std::string& f :
       {id, std::to_string(e.file.dev), std::to_string(e.file.ino), std::to_string(e.file.size),
        std::to_string(e.file.mtime_ns), std::to_string(e.file.ctime_ns), e.digest, e.status,
        std::to_string(e.schema_version), std::string(e.verified ? "1" : "0"), std::to_string(e.last_step), e.problem,
        e.objective_name, report_fmt::g17(e.objective), report_fmt::g17(e.tokens_per_s_median), e.health,
        e.throughput_group, std::string(e.shared_cores ? "1" : "0")})
    line += "\t" + escape(f);
  for (const auto& [k, v] : e.inputs) line += "\t" + escape(k + "=" + v);
  return line + "\n";
}

/// Parses one entry line; false when any field is not what it should be.
bool parse_entry(const std::string& line, std::string* id, IndexedRecord* e) {
  const std::vector<std::string> raw = split(line, '\t');
  if (raw.size() < kFixedFields || raw[0] != "R") return false;
  std::vector<std::string> f(raw.size());
  for (size_t i = 1; i < raw.size(); ++i)
    if (!unescape(raw[i], &f[i])) return false;
  *id = f[1];
  int64_t verified = 0;
  if (id->empty() || !parse_uint(f[2], &e->file.dev) || !parse_uint(f[3], &e->file.ino) ||
      !parse_int(f[4], &e->file.size) || !parse_int(f[5], &e->file.mtime_ns) || !parse_int(f[6], &e->file.ctime_ns) ||
      !parse_int(f[9], &e->schema_version) || !parse_int(f[10], &verified) || verified < 0 || verified > 1 ||
      !parse_int(f[11], &e->last_step) || !parse_double(f[14], &e->objective) ||
      !parse_double(f[15], &e->tokens_per_s_median) || (f[18] != "0" && f[18] != "1"))
    return false;
  e->digest = f[7];
  e->status = f[8];
  e->verified = verified == 1;
  e->problem = f[12];
  e->objective_name = f[13];
  e->health = f[16];
  e->throughput_group = f[17];
  e->shared_cores = f[18] == "1";
  for (size_t i = kFixedFields; i < f.size(); ++i) {
    const size_t eq = f[i].find('=');
    if (eq == std::string::npos) return false;
    e->inputs[f[i].substr(0, eq)] = f[i].substr(eq + 1);
  }
  return true;
}

}  // namespace

IndexedRecord index_entry(const std::string& run_dir, const Record& r, const FileIdentity& file, bool figures) {
  IndexedRecord e;
  e.file = file;
  e.digest = r.digest;
  e.status = r.status;
  e.schema_version = r.schema_version;
  e.verified = r.verified;
  e.last_step = r.steps.empty() ? 0 : r.steps.back().step;
  e.problem = record_content_problem(run_dir, r);
  for (const char* k : kInputKeys)
    if (const std::string v = r.env(k); !v.empty()) e.inputs[k] = v;
  if (!figures) return e;
  const RunFigures f = run_figures(r);
  e.objective_name = f.objective_name;
  e.objective = f.objective;
  e.health = health_names(run_health(r));
  const ThroughputPeer p = throughput_peer(r, f);
  e.tokens_per_s_median = p.tokens_per_s_median;
  e.throughput_group = p.group;
  e.shared_cores = p.shared_cores;
  return e;
}

Record inputs_record(const IndexedRecord& e) {
  Record r;
  r.environment = e.inputs;
  return r;
}

std::string index_text(const std::unordered_map<std::string, IndexedRecord>& entries) {
  std::vector<const std::pair<const std::string, IndexedRecord>*> sorted;
  sorted.reserve(entries.size());
  for (const auto& kv : entries)
    if (kv.second.settled) sorted.push_back(&kv);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
  std::string text = std::string(kIndexHead) + "\n";
  for (const auto* kv : sorted) text += entry_line(kv->first, kv->second);
  return text + "end " + std::to_string(sorted.size()) + " " + run_id_of_config(text) + "\n";
}

SweepIndex SweepIndex::load_saying(const std::string& dir) {
  SweepIndex index = load(dir);
  if (!index.note_.empty()) std::fprintf(stderr, "sweep: %s\n", index.note_.c_str());
  return index;
}

SweepIndex SweepIndex::empty(const std::string& dir) {
  SweepIndex index;
  index.dir_ = dir;
  index.changed_ = true;  // saved whole even when no record is entered
  return index;
}

SweepIndex SweepIndex::load(const std::string& dir) {
  SweepIndex index;
  index.dir_ = dir;
  const std::string path = dir + "/" + kIndexFile;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return index;  // none yet: built as the records are read
  const auto rebuild = [&](const std::string& why) {
    index.entries_.clear();
    index.changed_ = true;
    index.note_ = path + ": " + why + "; rebuilt from the records (the index is only a cache of them)";
    return index;
  };
  if (!S_ISREG(st.st_mode)) return rebuild("not a regular file");
  if (st.st_size > kMaxIndexBytes) return rebuild("larger than any index sweep writes");
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.eof() && in.fail()) return rebuild("cannot be read");
  const size_t head_end = text.find('\n');
  if (head_end == std::string::npos) return rebuild("damaged (truncated)");
  const std::string head = text.substr(0, head_end);
  if (head != kIndexHead) {
    if (head.rfind("sweep-index ", 0) == 0) return rebuild("written by another version of sweep (" + head + ")");
    return rebuild("damaged (its first line is not '" + std::string(kIndexHead) + "')");
  }
  // The last line: "end COUNT CHECKSUM", the checksum of everything before it.
  if (text.back() != '\n') return rebuild("damaged (truncated)");
  const size_t last = text.rfind('\n', text.size() - 2);
  const std::string body = text.substr(0, last + 1), end_line = text.substr(last + 1, text.size() - last - 2);
  if (end_line.rfind("end ", 0) != 0) return rebuild("damaged (truncated: no end line)");
  const size_t sp = end_line.find(' ', 4);
  int64_t count = -1;
  if (sp == std::string::npos || !parse_int(end_line.substr(4, sp - 4), &count) ||
      end_line.substr(sp + 1) != run_id_of_config(body))
    return rebuild("damaged or edited (its checksum does not match its contents)");
  size_t from = head_end + 1;
  while (from < body.size()) {
    const size_t nl = body.find('\n', from);
    std::string id;
    IndexedRecord e;
    if (!parse_entry(body.substr(from, nl - from), &id, &e) || index.entries_.count(id))
      return rebuild("damaged (an entry does not read)");
    e.settled = true;
    index.entries_.emplace(std::move(id), std::move(e));
    from = nl + 1;
  }
  if (count != int64_t(index.entries_.size())) return rebuild("damaged (its entry count does not match)");
  return index;
}

const IndexedRecord* SweepIndex::find(const std::string& id, const FileIdentity& now) const {
  const auto it = entries_.find(id);
  if (it == entries_.end() || !(it->second.file == now)) return nullptr;
  ++hits_;
  return &it->second;
}

void SweepIndex::put(const std::string& id, IndexedRecord e) {
  e.settled = settled(e.file);  // else too fresh to vouch for
  entries_[id] = std::move(e);
  changed_ = true;
}

void SweepIndex::forget(const std::string& id) {
  if (entries_.erase(id)) changed_ = true;
}

void SweepIndex::save() {
  if (!changed_ || dir_.empty()) return;
  const std::string path = dir_ + "/" + kIndexFile;
  struct stat st {};
  const bool exists = ::lstat(path.c_str(), &st) == 0;
  // Something else under the index's name (a directory, a FIFO, a link) is left alone:
  // writing through it could block or land elsewhere. And a directory that is not a
  // sweep's, or a sweep with nothing to remember yet, gets no index.
  if (exists && !S_ISREG(st.st_mode)) return;
  struct stat runs {};
  if (::stat((dir_ + "/runs").c_str(), &runs) != 0 || !S_ISDIR(runs.st_mode)) return;
  if (!exists && std::none_of(entries_.begin(), entries_.end(), [](const auto& kv) { return kv.second.settled; }))
    return;
  try {
    write_file_atomically(path, index_text(entries_));
    changed_ = false;
  } catch (const std::runtime_error&) {
    // Not writable here: the next reader reads the records again, as it would without one.
  }
}

}  // namespace sweep
