// The OpenBLAS kernel: which one the CPU's instruction-set flags allow, which one OpenBLAS
// picks itself, and a self-test (sweep-blas-probe, a child process: a kernel the CPU cannot
// run dies of SIGILL) that checks and times each, with its verdicts cached per machine.
// LibTorch-free and OpenBLAS-free: only the probe links OpenBLAS. The kernel is chosen by
// OPENBLAS_CORETYPE, which OpenBLAS reads once, when it loads.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace sweep {

/// The instruction-set flags of the first CPU in /proc/cpuinfo text ("flags : ..."); empty
/// when there is no such line (not x86). A pure function, so tests feed fake texts.
std::set<std::string> parse_cpu_flags(const std::string& cpuinfo_text);

/// The text of /proc/cpuinfo; "" when it cannot be read.
std::string read_cpuinfo();

/// One OpenBLAS x86_64 DYNAMIC_ARCH core: its OPENBLAS_CORETYPE name, the /proc/cpuinfo
/// flags its code uses, and its instruction-set level (kernels of one level run the same
/// instructions; a higher level is the stronger kernel).
struct BlasKernel {
  std::string name;                ///< as OPENBLAS_CORETYPE and openblas_get_corename() spell it
  std::vector<std::string> needs;  ///< /proc/cpuinfo flags ("pni" is SSE3)
  int level = 0;                   ///< 1 SSE3 ... 6 AVX2+FMA, 7 AVX-512, 8 AVX-512 BF16
};

/// The kernels of OpenBLAS 0.3.21's DYNAMIC_ARCH build that sweep knows, weakest first.
const std::vector<BlasKernel>& blas_kernels();

/// The table's entry for `name` (case-insensitive, as OpenBLAS matches it); nullptr when unknown.
const BlasKernel* find_blas_kernel(const std::string& name);

/// The table's entry for `name`; throws ConfigError naming `what` and the choices when it
/// is unknown ("--kernel: unknown BLAS kernel 'foo'; expected native, auto or one of ...";
/// without native and auto when `modes` is false, as for OPENBLAS_CORETYPE).
const BlasKernel& blas_kernel_named(const std::string& name, const std::string& what, bool modes = true);

/// The flags `kernel` needs that `flags` lacks, in table order; empty when it can run.
std::vector<std::string> missing_cpu_flags(const BlasKernel& kernel, const std::set<std::string>& flags);

/// Names of the kernels the flags allow, weakest first.
std::vector<std::string> supported_kernels(const std::set<std::string>& flags);

/// The strongest kernel the flags allow (of equal levels, the later in the table); "" when none.
std::string best_kernel(const std::set<std::string>& flags);

/// One sgemm shape of the self-test and its speed.
struct ShapeSpeed {
  std::string shape;  ///< "MxNxK", row-major C[MxN] = A[MxK] B[KxN]
  double gflops = 0;  ///< 2*M*N*K / best time, 1 thread
};

/// What one run of sweep-blas-probe said, or why it could not say it. The probe prints one
/// line (version 1), space-separated key=value fields after "sweep-blas-probe 1":
///   core=NAME pass=yes|no err=X gflops=SHAPE:G,... hash=16HEX build=CONFIG lib=PATH:SIZE:MTIME
/// (with --identify only core, build and lib). err is the worst |C-ref| over its fp32
/// bound, (K+2) 2^-24 sum_k |a_ik b_kj|, against a float64 reference: pass means err <= 1.
struct ProbeReport {
  std::string core;                ///< the kernel OpenBLAS ran (openblas_get_corename)
  bool pass = false;               ///< every checked element within its fp32 bound
  double err = 0;                  ///< worst error over its bound
  std::vector<ShapeSpeed> speeds;  ///< the shapes, in the probe's order
  std::string hash;                ///< xxh64 of the 256x64x64 output's bits: tells kernels apart
  std::string library;             ///< "CONFIG LIB": the OpenBLAS build, less the core name
  std::string refused;             ///< "" when usable, else "refused: <why>", one line
  bool ok() const { return refused.empty(); }
  double peak_gflops() const;  ///< the largest shape's GFLOP/s; 0 when none
  double score() const;        ///< geometric mean of the shapes' GFLOP/s: what auto maximises
};

/// Parses the probe's output (other lines are ignored). When no result line is there, or
/// it is malformed, `refused` says so and quotes the output's last line.
ProbeReport parse_probe_output(const std::string& output, bool identify = false);

/// Settings of the kernel choice; filled once at the edge (blas_settings_from_environment).
struct BlasSettings {
  std::string probe;          ///< path of sweep-blas-probe
  std::string cache_dir;      ///< where verdicts are kept; "" = no cache
  std::string user_coretype;  ///< OPENBLAS_CORETYPE from the user's environment; "" when unset
  double timeout_s = 30;      ///< per probe run, seconds; then it is killed and refused
  bool refresh = false;       ///< ignore cached verdicts, probe again, rewrite the cache
  /// Tests only (SWEEP_TEST_BLAS_NATIVE): the kernel the probe runs as "OpenBLAS's own
  /// choice", standing for a machine whose CPU identity OpenBLAS misjudges.
  std::string native_for_test;
};

/// The settings from the environment: the probe next to this executable; the cache in
/// $SWEEP_CACHE_DIR, else $XDG_CACHE_HOME/sweep, else $HOME/.cache/sweep; OPENBLAS_CORETYPE.
BlasSettings blas_settings_from_environment();

/// Runs the probe once, no shell: OPENBLAS_CORETYPE=`kernel` in the child's environment
/// only ("" = unset: OpenBLAS's own choice), OPENBLAS_NUM_THREADS=1. A child killed by a
/// signal, failing the check, timing out or running another kernel than asked is refused
/// with one line. Throws std::runtime_error only when the probe cannot be started.
ProbeReport run_blas_probe(const BlasSettings& s, const std::string& kernel, bool identify = false);

/// Every kernel the flags allow, with its verdict; what `sweep blas` shows and auto picks from.
struct BlasSurvey {
  std::string native;       ///< the kernel OpenBLAS picks itself
  std::string best;         ///< the strongest kernel the flags allow ("" when none)
  std::string library;      ///< the OpenBLAS build and file (part of the cache key)
  std::string cache_file;   ///< where the verdicts are kept; "" without a cache
  bool from_cache = false;  ///< every verdict came from the cache: nothing was probed
  std::string cache_error;  ///< why the cache could not be written; "" when it was (or none)
  std::vector<std::pair<std::string, ProbeReport>> verdicts;  ///< supported kernels, weakest first
};

/// Probes each supported kernel, unless its verdict is cached under (flags, library).
/// Also probes OpenBLAS's own choice when the table does not hold it.
BlasSurvey survey_blas_kernels(const std::set<std::string>& flags, const BlasSettings& s);

/// auto replaces OpenBLAS's own choice only with a kernel at least this much faster
/// (score): closer timings are noise here (kernels within 5% swapped places between two
/// surveys of one machine) and every kernel gives other bits.
inline constexpr int kAutoMarginPercent = 15;
inline constexpr double kAutoMargin = 1.0 + kAutoMarginPercent / 100.0;

/// The kernel a run uses and why.
struct BlasChoice {
  std::string coretype;  ///< the OPENBLAS_CORETYPE to set; "" = leave it unset (OpenBLAS chooses)
  std::string kernel;    ///< the kernel that runs
  ProbeReport verdict;   ///< its self-test (refused: the request cannot be honoured)
  std::string note;      ///< one line: why this one
};

/// Resolves "native", "auto" or a kernel name. auto: OpenBLAS's own choice when it is of
/// the strongest level the flags allow and passes its self-test (nothing is timed); else
/// the fastest (ProbeReport::score) of the supported kernels that pass, when it is
/// kAutoMargin faster than native, else native; native: OpenBLAS's own
/// choice; a name: validated against the table (ConfigError listing the choices) and the flags (refused unprobed). A
/// user's OPENBLAS_CORETYPE wins over auto and native, with a note; a name overrides it, with a note. Uses `survey`
/// when given (auto), else surveys or probes what it needs.
BlasChoice choose_blas_kernel(const std::string& request, const std::set<std::string>& flags, const BlasSettings& s,
                              const BlasSurvey* survey = nullptr);

}  // namespace sweep
