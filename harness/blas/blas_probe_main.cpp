// sweep-blas-probe: the self-test of one OpenBLAS kernel (the one OPENBLAS_CORETYPE names,
// else OpenBLAS's own choice), run by `sweep` as a child because a kernel the CPU cannot
// run dies of SIGILL. On 1 thread it checks sgemm shapes the trainer uses against a float64
// reference, times them and prints one line (format: ProbeReport in blas_kernel.h):
//   sweep-blas-probe 1 core=Haswell pass=yes err=0.01 gflops=256x64x64:40,... hash=... build=... lib=...
// With --identify it only names the kernel and the library (no GEMM).
// Exit codes: 0 passed (or identified), 1 a result was wrong, 2 usage.
#include <cblas.h>  // cblas_sgemm, openblas_get_corename, openblas_get_config
#include <dlfcn.h>  // dladdr: which library file is loaded
#include <sys/stat.h>
#include <xxhash.h>  // XXH64 of the output's bits

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>  // realpath, free
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Shape {
  int m, n, k;
};

// 256x64x64 and 256x256x64 are the trainer's (tokens x width x width); 1024^3 is the peak.
constexpr Shape kShapes[] = {{256, 64, 64}, {256, 256, 64}, {1024, 1024, 1024}};
constexpr int kSampledChecks = 512;  // elements checked in a shape too big to check whole

uint64_t next(uint64_t& s) {  // xorshift64*: the same inputs in every probe
  s ^= s >> 12;
  s ^= s << 25;
  s ^= s >> 27;
  return s * 2685821657736338717ULL;
}

std::vector<float> random_matrix(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  for (auto& x : v) x = float(double(next(seed) >> 11) / double(1ULL << 53) * 2.0 - 1.0);
  return v;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void sgemm(const Shape& s, const float* a, const float* b, float* c) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1.0f, a, s.k, b, s.n, 0.0f, c, s.n);
}

// Worst |c - ref| over its bound (K+2) 2^-24 sum_k |a_ik b_kj|: any fp32 summation order
// stays within it, a wrong kernel does not. NaN counts as a failure.
double error_ratio(const Shape& s, const float* a, const float* b, const float* c, int i, int j) {
  double ref = 0, mag = 0;
  for (int p = 0; p < s.k; ++p) {
    const double t = double(a[size_t(i) * s.k + p]) * double(b[size_t(p) * s.n + j]);
    ref += t;
    mag += std::fabs(t);
  }
  const double bound = (s.k + 2) * std::ldexp(1.0, -24) * mag + 1e-30;
  const double r = std::fabs(double(c[size_t(i) * s.n + j]) - ref) / bound;
  return std::isnan(r) ? INFINITY : r;
}

// Best GFLOP/s of a few timed batches, each long enough (>= 2 ms) for the clock.
double time_shape(const Shape& s, const float* a, const float* b, float* c) {
  const double flops = 2.0 * s.m * s.n * s.k;
  auto t0 = std::chrono::steady_clock::now();
  sgemm(s, a, b, c);
  const double one = std::max(seconds_since(t0), 1e-7);
  const int calls = std::max(1, int(2e-3 / one));
  const int batches = flops > 1e9 ? 3 : 5;
  double best = INFINITY;
  for (int r = 0; r < batches; ++r) {
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) sgemm(s, a, b, c);
    best = std::min(best, seconds_since(t0) / calls);
  }
  return flops / best / 1e9;
}

// "PATH:SIZE:MTIME" of the loaded OpenBLAS (a rebuilt library is a new cache key).
std::string library_identity() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cblas_sgemm), &info) == 0 || !info.dli_fname) return "unknown";
  char* real = ::realpath(info.dli_fname, nullptr);  // the file itself, not libopenblas.so.0
  std::string path = real ? real : info.dli_fname;
  std::free(real);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return path;
  for (char& ch : path)
    if (ch == ' ') ch = '?';
  return path + ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtime);
}

// openblas_get_config() less the core's name (it names the build, not the kernel), '_' for ' '.
std::string build_config(const std::string& core) {
  std::string cfg = openblas_get_config(), out;
  size_t at = 0;
  while (at < cfg.size()) {
    size_t sp = cfg.find(' ', at);
    if (sp == std::string::npos) sp = cfg.size();
    const std::string word = cfg.substr(at, sp - at);
    if (!word.empty() && word != core) out += (out.empty() ? "" : "_") + word;
    at = sp + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const bool identify = argc == 2 && std::strcmp(argv[1], "--identify") == 0;
  if (argc > 2 || (argc == 2 && !identify)) {
    std::fprintf(stderr, "usage: sweep-blas-probe [--identify]  (OPENBLAS_CORETYPE picks the kernel)\n");
    return 2;
  }
  openblas_set_num_threads(1);
  const std::string core = openblas_get_corename();
  const std::string tail = " build=" + build_config(core) + " lib=" + library_identity();
  if (identify) {
    std::printf("sweep-blas-probe 1 core=%s%s\n", core.c_str(), tail.c_str());
    return 0;
  }
  double worst = 0;
  std::string speeds, hash;
  for (const Shape& s : kShapes) {
    const auto a = random_matrix(size_t(s.m) * s.k, 0x5eed0001 + s.m);
    const auto b = random_matrix(size_t(s.k) * s.n, 0x5eed0002 + s.n);
    std::vector<float> c(size_t(s.m) * s.n);
    sgemm(s, a.data(), b.data(), c.data());
    if (hash.empty()) {
      char buf[17];
      std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)XXH64(c.data(), c.size() * sizeof(float), 0));
      hash = buf;
    }
    const size_t elems = c.size();
    if (elems <= size_t(256) * 256) {
      for (int i = 0; i < s.m; ++i)
        for (int j = 0; j < s.n; ++j) worst = std::max(worst, error_ratio(s, a.data(), b.data(), c.data(), i, j));
    } else {
      uint64_t seed = 0x5eed0003;
      for (int t = 0; t < kSampledChecks; ++t) {
        const int i = int(next(seed) % uint64_t(s.m)), j = int(next(seed) % uint64_t(s.n));
        worst = std::max(worst, error_ratio(s, a.data(), b.data(), c.data(), i, j));
      }
    }
    const double gflops = time_shape(s, a.data(), b.data(), c.data());
    char item[64];
    std::snprintf(item, sizeof item, "%s%dx%dx%d:%.2f", speeds.empty() ? "" : ",", s.m, s.n, s.k, gflops);
    speeds += item;
  }
  const bool pass = worst <= 1.0;
  std::printf("sweep-blas-probe 1 core=%s pass=%s err=%.4g gflops=%s hash=%s%s\n", core.c_str(), pass ? "yes" : "no",
              worst, speeds.c_str(), hash.c_str(), tail.c_str());
  return pass ? 0 : 1;
}
