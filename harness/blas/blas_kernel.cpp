// The OpenBLAS kernel table, the probe child and the per-machine cache of its verdicts.
#include "blas_kernel.h"

#include <signal.h>
#include <strings.h>  // strcasecmp
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <stdexcept>

#include "atomic_file.h"   // write_file_atomically
#include "config_error.h"  // ConfigError
#include "data_file.h"     // sweep_cache_dir
#include "hex.h"           // hex16
#include "process.h"       // ExitStatus, executable_dir
#include "text.h"          // join, printable, did_you_mean

extern char** environ;

namespace fs = std::filesystem;

namespace sweep {
namespace {

constexpr const char* kProbeMagic = "sweep-blas-probe 1";
constexpr const char* kCacheMagic = "sweep-blas-cache 1";
// A timeout says the machine was busy, not that the kernel is bad: never cached.
constexpr const char* kTimeoutRefusal = "refused: the self-test did not finish";

std::vector<std::string> split_ws(const std::string& s) {
  std::istringstream in(s);
  return {std::istream_iterator<std::string>(in), std::istream_iterator<std::string>()};
}

std::string last_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
  auto nl = t.find_last_of('\n');
  return printable(nl == std::string::npos ? t : t.substr(nl + 1));
}

std::vector<std::string> choice_names() {
  std::vector<std::string> names = {"native", "auto"};
  for (const auto& k : blas_kernels()) names.push_back(k.name);
  return names;
}

// The probe's line for a report: what the cache keeps.
std::string format_probe_line(const ProbeReport& r) {
  std::ostringstream o;
  o.precision(6);
  o << kProbeMagic << " core=" << r.core << " pass=" << (r.pass ? "yes" : "no") << " err=" << r.err << " gflops=";
  for (size_t i = 0; i < r.speeds.size(); ++i) o << (i ? "," : "") << r.speeds[i].shape << ":" << r.speeds[i].gflops;
  o << " hash=" << r.hash;
  return o.str();
}

// ---------------------------------------------------------------- the cache

// One file per (flags, library): blas-<key>.txt. Lines after the magic:
//   key K / flags F... / library L / kernel NAME <probe line or "refused: ...">
struct VerdictCache {
  std::string path;     // "" = no cache
  std::string key;      // xxh64 of flags and library
  std::string flags;    // the sorted flags, space-separated
  std::string library;  // ProbeReport::library of the identify run
  std::map<std::string, ProbeReport> verdicts;
  bool changed = false;
  int probes = 0;  // verdicts that came from the probe, not the file

  VerdictCache(const BlasSettings& s, const std::set<std::string>& fl, const std::string& lib) : library(lib) {
    flags = join(std::vector<std::string>(fl.begin(), fl.end()), " ");
    const std::string keyed = flags + "\n" + library;
    key = hex16(XXH64(keyed.data(), keyed.size(), 0));
    if (!s.cache_dir.empty()) path = s.cache_dir + "/blas-" + key + ".txt";
    if (!path.empty() && !s.refresh) load();
  }

  // A file that does not read back whole, or holds another key, is ignored (and rewritten).
  void load() {
    std::ifstream in(path);
    std::string line;
    if (!in || !std::getline(in, line) || line != kCacheMagic) return;
    std::map<std::string, ProbeReport> got;
    bool key_ok = false, library_ok = false;
    while (std::getline(in, line)) {
      auto sp = line.find(' ');
      if (sp == std::string::npos) return;
      const std::string field = line.substr(0, sp), value = line.substr(sp + 1);
      if (field == "key") {
        key_ok = value == key;
      } else if (field == "flags") {
        if (value != flags) return;
      } else if (field == "library") {
        library_ok = value == library;
      } else if (field == "kernel") {
        auto sp2 = value.find(' ');
        if (sp2 == std::string::npos) return;
        const std::string name = value.substr(0, sp2), rest = value.substr(sp2 + 1);
        ProbeReport r;
        if (rest.rfind("refused: ", 0) == 0) {
          r.refused = rest;
        } else {
          r = parse_probe_output(rest);
          if (!r.ok() || r.core != name) return;
        }
        got[name] = r;
      } else {
        return;
      }
    }
    if (key_ok && library_ok) verdicts = std::move(got);
  }

  const ProbeReport* find(const std::string& name) const {
    auto it = verdicts.find(name);
    return it == verdicts.end() ? nullptr : &it->second;
  }

  void put(const std::string& name, const ProbeReport& r) {
    if (r.refused.rfind(kTimeoutRefusal, 0) == 0) return;
    verdicts[name] = r;
    changed = true;
  }

  // "" when written (or nothing to write), else why not.
  std::string save() {
    if (path.empty() || !changed) return "";
    std::ostringstream o;
    o << kCacheMagic << "\nkey " << key << "\nflags " << flags << "\nlibrary " << library << "\n";
    for (const auto& [name, r] : verdicts)
      o << "kernel " << name << " " << (r.ok() ? format_probe_line(r) : r.refused) << "\n";
    try {
      std::error_code ec;
      fs::create_directories(fs::path(path).parent_path(), ec);
      write_file_atomically(path, o.str());
    } catch (const std::exception& e) {
      return std::string("cannot keep the BLAS verdicts: ") + e.what();
    }
    changed = false;
    return "";
  }
};

ProbeReport identify(const BlasSettings& s) {
  ProbeReport id = run_blas_probe(s, "", true);
  if (!id.ok())
    throw std::runtime_error("the BLAS self-test " + printable(s.probe) + " --identify failed: " + id.refused);
  return id;
}

// The verdict on `name` from the cache, else from the probe (OPENBLAS_CORETYPE=`coretype`).
ProbeReport verdict_for(VerdictCache& cache, const BlasSettings& s, const std::string& name,
                        const std::string& coretype) {
  if (const ProbeReport* r = cache.find(name)) return *r;
  ProbeReport r = run_blas_probe(s, coretype);
  ++cache.probes;
  cache.put(name, r);
  return r;
}

ProbeReport refused_for_flags(const BlasKernel& k, const std::set<std::string>& flags) {
  ProbeReport r;
  r.core = k.name;
  r.refused = "refused: kernel " + k.name + " needs CPU flags " + join(missing_cpu_flags(k, flags)) +
              ", which this CPU lacks (/proc/cpuinfo)";
  return r;
}

}  // namespace

// ---------------------------------------------------------------- flags and the table

std::set<std::string> parse_cpu_flags(const std::string& cpuinfo_text) {
  std::istringstream in(cpuinfo_text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, colon);
    if (key.find_first_not_of(" \t", 5) != std::string::npos) continue;  // "flags" only, not "vmx flags"
    auto words = split_ws(line.substr(colon + 1));
    return {words.begin(), words.end()};
  }
  return {};
}

std::string read_cpuinfo() {
  std::ifstream in("/proc/cpuinfo");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

const std::vector<BlasKernel>& blas_kernels() {
  // The cores OpenBLAS 0.3.21's DYNAMIC_ARCH build has (each name checked: OPENBLAS_CORETYPE
  // set to it makes openblas_get_corename() report it). Katmai, Coppermine, Northwood,
  // Banias and Athlon are not built (they run Prescott); SapphireRapids is newer than
  // 0.3.21. Atom, Nano and the AMD cores before Zen (Opteron ... Excavator) are built but
  // left out: slower than a kernel of their level here, and their flag needs (3DNow!, FMA4)
  // are not worth a guess. The needs are what each core's code is compiled for.
  static const std::vector<BlasKernel> table = {
      {"Prescott", {"sse2", "pni"}, 1},
      {"Core2", {"sse2", "pni", "ssse3"}, 2},
      {"Penryn", {"sse2", "pni", "ssse3", "sse4_1"}, 3},
      {"Dunnington", {"sse2", "pni", "ssse3", "sse4_1"}, 3},
      {"Nehalem", {"sse2", "pni", "ssse3", "sse4_1", "sse4_2", "popcnt"}, 4},
      {"Sandybridge", {"sse2", "pni", "ssse3", "sse4_1", "sse4_2", "popcnt", "avx"}, 5},
      {"Zen", {"sse2", "pni", "ssse3", "sse4_1", "sse4_2", "popcnt", "avx", "avx2", "fma"}, 6},
      {"Haswell", {"sse2", "pni", "ssse3", "sse4_1", "sse4_2", "popcnt", "avx", "avx2", "fma"}, 6},
      {"SkylakeX",
       {"sse2", "pni", "ssse3", "sse4_1", "sse4_2", "popcnt", "avx", "avx2", "fma", "avx512f", "avx512cd", "avx512bw",
        "avx512dq", "avx512vl"},
       7},
      {"Cooperlake",
       {"sse2", "pni", "ssse3", "sse4_1", "sse4_2", "popcnt", "avx", "avx2", "fma", "avx512f", "avx512cd", "avx512bw",
        "avx512dq", "avx512vl", "avx512_bf16"},
       8},
  };
  return table;
}

const BlasKernel* find_blas_kernel(const std::string& name) {
  for (const auto& k : blas_kernels())
    if (strcasecmp(k.name.c_str(), name.c_str()) == 0) return &k;
  return nullptr;
}

const BlasKernel& blas_kernel_named(const std::string& name, const std::string& what, bool modes) {
  if (const BlasKernel* k = find_blas_kernel(name)) return *k;
  std::vector<std::string> kernels;
  for (const auto& k : blas_kernels()) kernels.push_back(k.name);
  throw ConfigError(what + ": unknown BLAS kernel '" + printable(name) + "'" +
                    did_you_mean(name, modes ? choice_names() : kernels) + "; expected " +
                    (modes ? "native, auto or " : "") + "one of " + join(kernels));
}

std::vector<std::string> missing_cpu_flags(const BlasKernel& kernel, const std::set<std::string>& flags) {
  std::vector<std::string> out;
  for (const auto& f : kernel.needs)
    if (!flags.count(f)) out.push_back(f);
  return out;
}

std::vector<std::string> supported_kernels(const std::set<std::string>& flags) {
  std::vector<std::string> out;
  for (const auto& k : blas_kernels())
    if (missing_cpu_flags(k, flags).empty()) out.push_back(k.name);
  return out;
}

std::string best_kernel(const std::set<std::string>& flags) {
  const BlasKernel* best = nullptr;
  for (const auto& k : blas_kernels())
    if (missing_cpu_flags(k, flags).empty() && (!best || k.level >= best->level)) best = &k;
  return best ? best->name : "";
}

// ---------------------------------------------------------------- the probe

double ProbeReport::peak_gflops() const { return speeds.empty() ? 0 : speeds.back().gflops; }

double ProbeReport::score() const {
  if (speeds.empty()) return 0;
  double log_sum = 0;
  for (const auto& s : speeds) {
    if (!(s.gflops > 0)) return 0;
    log_sum += std::log(s.gflops);
  }
  return std::exp(log_sum / double(speeds.size()));
}

ProbeReport parse_probe_output(const std::string& output, bool identify) {
  ProbeReport r;
  std::istringstream in(output);
  std::string line, found;
  while (std::getline(in, line))
    if (line.rfind(std::string(kProbeMagic) + " ", 0) == 0) found = line;
  if (found.empty()) {
    r.refused = "refused: the self-test printed no result line" +
                (last_line(output).empty() ? std::string() : " (it said: " + last_line(output) + ")");
    return r;
  }
  std::map<std::string, std::string> kv;
  for (const auto& word : split_ws(found.substr(std::strlen(kProbeMagic)))) {
    auto eq = word.find('=');
    if (eq != std::string::npos) kv[word.substr(0, eq)] = word.substr(eq + 1);
  }
  const auto bad = [&](const std::string& why) {
    ProbeReport b;
    b.core = r.core;
    b.refused = "refused: the self-test's result line is malformed (" + why + "): " + printable(found);
    return b;
  };
  r.core = kv["core"];
  if (r.core.empty()) return bad("no core");
  if (kv.count("build") || kv.count("lib")) r.library = kv["build"] + " " + kv["lib"];
  if (identify) return r;
  if (kv["pass"] != "yes" && kv["pass"] != "no") return bad("pass is neither yes nor no");
  r.pass = kv["pass"] == "yes";
  char* end = nullptr;
  r.err = std::strtod(kv["err"].c_str(), &end);
  if (kv["err"].empty() || *end) return bad("err is not a number");
  std::istringstream shapes(kv["gflops"]);
  std::string item;
  while (std::getline(shapes, item, ',')) {
    auto colon = item.find(':');
    if (colon == std::string::npos) return bad("gflops wants SHAPE:G");
    ShapeSpeed sp{item.substr(0, colon), std::strtod(item.c_str() + colon + 1, &end)};
    if (*end || sp.shape.empty()) return bad("gflops wants SHAPE:G");
    r.speeds.push_back(sp);
  }
  if (r.speeds.empty()) return bad("no gflops");
  r.hash = kv["hash"];
  if (r.hash.size() != 16 || r.hash.find_first_not_of("0123456789abcdef") != std::string::npos)
    return bad("hash is not 16 hex digits");
  if (!r.pass) {
    r.refused = "refused: kernel " + r.core + " computed a wrong sgemm (error " + significant(r.err, 3) +
                " times the fp32 bound against a float64 reference)";
  }
  return r;
}

BlasSettings blas_settings_from_environment() {
  BlasSettings s;
  s.probe = executable_dir() + "/sweep-blas-probe";
  const auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v ? v : "");
  };
  s.cache_dir = sweep_cache_dir();
  s.user_coretype = env("OPENBLAS_CORETYPE");
  s.native_for_test = env("SWEEP_TEST_BLAS_NATIVE");
  return s;
}

ProbeReport run_blas_probe(const BlasSettings& s, const std::string& kernel, bool identify) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string var = *e;
    if (var.rfind("OPENBLAS_CORETYPE=", 0) == 0 || var.rfind("OPENBLAS_NUM_THREADS=", 0) == 0) continue;
    env.push_back(var);
  }
  env.push_back("OPENBLAS_NUM_THREADS=1");
  if (!kernel.empty())
    env.push_back("OPENBLAS_CORETYPE=" + kernel);
  else if (!s.native_for_test.empty())
    env.push_back("OPENBLAS_CORETYPE=" + s.native_for_test);  // stands for a CPU OpenBLAS misjudges
  std::vector<std::string> argv = {s.probe};
  if (identify) argv.push_back("--identify");
  CaptureOptions run;
  run.timeout_s = s.timeout_s;
  run.env = env;
  run.max_output_bytes = 1 << 16;
  run.note_timeout = false;
  Captured c;
  try {
    c = capture(argv, run);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("cannot start the BLAS self-test: " + std::string(e.what()) +
                             " (expected sweep-blas-probe next to sweep)");
  }
  const std::string which = kernel.empty() ? "OpenBLAS's own choice" : "kernel " + kernel;
  ProbeReport r;
  if (c.timed_out) {
    r.core = kernel;
    char secs[32];
    std::snprintf(secs, sizeof secs, "%g", s.timeout_s);
    r.refused = std::string(kTimeoutRefusal) + " for " + which + " in " + secs + " s";
    return r;
  }
  if (c.status.signal) {
    r.core = kernel;
    r.refused = "refused: the self-test of " + which + " was " + c.status.describe() +
                (c.status.signal == SIGILL ? ": this CPU cannot run it" : "");
    return r;
  }
  r = parse_probe_output(c.output, identify);
  if (r.ok() && !kernel.empty() && strcasecmp(r.core.c_str(), kernel.c_str()) != 0) {
    r.refused = "refused: OpenBLAS ran kernel " + r.core + " when asked for " + kernel +
                " (this OpenBLAS build does not have it)";
  } else if (c.status.code != 0 && (r.ok() || r.speeds.empty())) {
    // A result line with pass=no keeps its own reason; any other failure quotes the output.
    r.refused = "refused: the self-test of " + which + " ended with " + c.status.describe() +
                (last_line(c.output).empty() ? "" : ": " + last_line(c.output));
  }
  if (r.core.empty()) r.core = kernel;
  return r;
}

// ---------------------------------------------------------------- survey and choice

BlasSurvey survey_blas_kernels(const std::set<std::string>& flags, const BlasSettings& s) {
  const ProbeReport id = identify(s);
  VerdictCache cache(s, flags, id.library);
  BlasSurvey out;
  out.native = id.core;
  out.best = best_kernel(flags);
  out.library = id.library;
  out.cache_file = cache.path;
  bool native_listed = false;
  for (const auto& name : supported_kernels(flags)) {
    out.verdicts.emplace_back(name, verdict_for(cache, s, name, name));
    native_listed = native_listed || name == id.core;
  }
  if (!native_listed) out.verdicts.emplace_back(id.core, verdict_for(cache, s, id.core, ""));
  out.from_cache = cache.probes == 0;
  out.cache_error = cache.save();
  return out;
}

BlasChoice choose_blas_kernel(const std::string& request, const std::set<std::string>& flags, const BlasSettings& s,
                              const BlasSurvey* survey) {
  const bool is_auto = request == "auto", is_native = request == "native";
  const BlasKernel* named = is_auto || is_native ? nullptr : &blas_kernel_named(request, "--kernel");
  BlasChoice c;
  // The user's OPENBLAS_CORETYPE: kept over auto and native, never replaced silently.
  if (!s.user_coretype.empty()) {
    const BlasKernel& user = blas_kernel_named(s.user_coretype, "OPENBLAS_CORETYPE (set in the environment)", false);
    if (!named) {
      named = &user;
      c.note = "OPENBLAS_CORETYPE=" + printable(s.user_coretype) + " is set in the environment: kept (instead of " +
               request + "; unset it to let sweep choose)";
    } else if (named != &user) {
      c.note = "--kernel " + named->name + " replaces OPENBLAS_CORETYPE=" + printable(s.user_coretype) +
               " from the environment";
    }
  }
  if (named) {
    c.coretype = c.kernel = named->name;
    if (c.note.empty()) c.note = "asked for by name";
    if (!missing_cpu_flags(*named, flags).empty()) {
      c.verdict = refused_for_flags(*named, flags);
      return c;
    }
    if (survey) {
      for (const auto& [name, r] : survey->verdicts)
        if (name == named->name) {
          c.verdict = r;
          return c;
        }
    }
    const ProbeReport id = identify(s);
    VerdictCache cache(s, flags, id.library);
    c.verdict = verdict_for(cache, s, named->name, named->name);
    cache.save();
    return c;
  }
  // OpenBLAS's own choice is the strongest level this CPU runs (a healthy machine): it
  // stays, once its self-test passes, and nothing is timed, so the choice cannot change
  // with the load of the moment.
  if (!survey) {
    const ProbeReport id = identify(s);
    const BlasKernel* own = find_blas_kernel(id.core);
    const BlasKernel* best = find_blas_kernel(best_kernel(flags));
    if (id.ok() && own && best && own->level >= best->level) {
      VerdictCache cache(s, flags, id.library);
      c.kernel = own->name;
      c.verdict = verdict_for(cache, s, own->name, "");
      cache.save();
      if (c.verdict.ok()) {
        c.note = is_native ? "OpenBLAS's own choice"
                           : "OpenBLAS's own choice, the strongest kernel this CPU runs (" + own->name + ")";
        return c;
      }
    }
  }
  BlasSurvey own;
  if (!survey) {
    own = survey_blas_kernels(flags, s);
    survey = &own;
  }
  const ProbeReport* native = nullptr;
  for (const auto& [name, r] : survey->verdicts)
    if (name == survey->native) native = &r;
  c.kernel = survey->native;
  if (native) c.verdict = *native;
  if (is_native) {
    c.note = "OpenBLAS's own choice";
    return c;
  }
  const std::pair<std::string, ProbeReport>* fastest = nullptr;
  for (const auto& v : survey->verdicts)
    if (v.second.ok() && find_blas_kernel(v.first) && (!fastest || v.second.score() > fastest->second.score()))
      fastest = &v;
  if (!fastest) {
    c.note = "no kernel passed its self-test: OpenBLAS's own choice kept";
    return c;
  }
  // Timings of kernels within a few percent swap places from one survey to the next
  // (shared cores), and each kernel has its own bits: OpenBLAS's choice stays unless
  // another kernel is clearly faster, so identical machines choose alike.
  if (native && native->ok() && native->score() * kAutoMargin >= fastest->second.score()) {
    c.note = "OpenBLAS's own choice: no kernel that passed its self-test is " + std::to_string(kAutoMarginPercent) +
             "% faster";
    return c;
  }
  c.coretype = c.kernel = fastest->first;
  c.verdict = fastest->second;
  c.note = "the fastest kernel that passed its self-test, at least " + std::to_string(kAutoMarginPercent) +
           "% faster than OpenBLAS's own choice" + (native ? " (" + survey->native + ")" : "");
  return c;
}

}  // namespace sweep
