// The BLAS kernel choice (blas_kernel.h): /proc/cpuinfo flags from fake texts, the kernel
// table, unknown names, the verdict cache (round trip, corrupt file, refresh), the user's
// OPENBLAS_CORETYPE, refusals (SIGILL, wrong result, timeout, a kernel the CPU lacks) with
// fake probes (shell scripts), and the real sweep-blas-probe on native and Haswell.
#include "blas_kernel.h"

#include <gtest/gtest.h>
#include <stdlib.h>  // setenv, unsetenv
#include <sys/stat.h>

#include <algorithm>  // count
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "config_error.h"  // ConfigError
#include "temp_dir.h"      // TempDirTest
#include "test_util.h"     // EXPECT_CONTAINS, read_file, write_file

namespace sweep {
namespace {

namespace fs = std::filesystem;
using sweep_test::read_file;
using sweep_test::write_file;

// Trimmed from real machines: the first processor's block and a second one after it.
const char* kAvx512Cpuinfo =
    "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9R14 96-Core Processor\n"
    "flags\t\t: fpu vme sse sse2 ht syscall nx pni ssse3 fma cx16 sse4_1 sse4_2 popcnt aes xsave avx f16c "
    "avx2 bmi2 avx512f avx512dq avx512ifma avx512cd avx512bw avx512vl avx512_bf16 avx512vbmi avx512_vnni\n"
    "vmx flags\t: vnmi preemption_timer\nbugs\t\t: sysret_ss_attrs\n\n"
    "processor\t: 1\nflags\t\t: fpu sse sse2\n";
const char* kAvx2Cpuinfo =
    "processor\t: 0\nmodel name\t: Intel(R) Core(TM) i7-4770\n"
    "flags\t\t: fpu sse sse2 pni ssse3 fma sse4_1 sse4_2 popcnt avx f16c avx2 bmi1 bmi2\n";
const char* kSse3Cpuinfo = "processor\t: 0\nmodel name\t: QEMU Virtual CPU version 2.5+\nflags\t\t: fpu sse sse2 pni\n";

std::set<std::string> flags_of(const char* cpuinfo) { return parse_cpu_flags(cpuinfo); }

TEST(CpuFlags, TakesTheFirstProcessorsFlagsLineOnly) {
  auto f = flags_of(kAvx512Cpuinfo);
  EXPECT_TRUE(f.count("avx512_bf16"));
  EXPECT_TRUE(f.count("pni"));
  EXPECT_FALSE(f.count("vnmi"));   // from "vmx flags", not "flags"
  EXPECT_FALSE(f.count("flags"));  // the key is not a flag
  EXPECT_EQ(f.size(), 29u);        // the second processor's line is not merged in
  EXPECT_TRUE(flags_of(kAvx2Cpuinfo).count("avx2"));
  EXPECT_FALSE(flags_of(kAvx2Cpuinfo).count("avx512f"));
  EXPECT_EQ(flags_of(kSse3Cpuinfo), (std::set<std::string>{"fpu", "sse", "sse2", "pni"}));
  EXPECT_TRUE(parse_cpu_flags("processor : 0\nFeatures : fp asimd\n").empty());  // not x86
}

TEST(BlasKernels, SupportedAndBestFollowTheFlags) {
  EXPECT_EQ(supported_kernels(flags_of(kSse3Cpuinfo)), std::vector<std::string>{"Prescott"});
  EXPECT_EQ(best_kernel(flags_of(kSse3Cpuinfo)), "Prescott");
  auto avx2 = supported_kernels(flags_of(kAvx2Cpuinfo));
  EXPECT_EQ(avx2.back(), "Haswell");
  EXPECT_EQ(std::count(avx2.begin(), avx2.end(), "SkylakeX"), 0);
  EXPECT_EQ(best_kernel(flags_of(kAvx2Cpuinfo)), "Haswell");
  EXPECT_EQ(best_kernel(flags_of(kAvx512Cpuinfo)), "Cooperlake");
  auto no_bf16 = flags_of(kAvx512Cpuinfo);
  no_bf16.erase("avx512_bf16");
  EXPECT_EQ(best_kernel(no_bf16), "SkylakeX");
  EXPECT_EQ(best_kernel({"sse", "sse2"}), "");  // not even SSE3
  EXPECT_EQ(missing_cpu_flags(*find_blas_kernel("SkylakeX"), flags_of(kAvx2Cpuinfo)),
            (std::vector<std::string>{"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}));
  // Weakest first, levels never decreasing: best_kernel and "weaker than" rely on it.
  for (size_t i = 1; i < blas_kernels().size(); ++i) EXPECT_LE(blas_kernels()[i - 1].level, blas_kernels()[i].level);
}

TEST(BlasKernels, NamesMatchCaseInsensitivelyAndUnknownNamesListTheChoices) {
  EXPECT_EQ(blas_kernel_named("haswell", "--kernel").name, "Haswell");
  try {
    blas_kernel_named("Skylake", "--kernel");
    FAIL() << "no error for an unknown kernel";
  } catch (const ConfigError& e) {
    EXPECT_CONTAINS(e.what(), "--kernel: unknown BLAS kernel 'Skylake'");
    EXPECT_CONTAINS(e.what(), "expected native, auto or one of Prescott, ");
    EXPECT_CONTAINS(e.what(), "Cooperlake");
  }
  BlasSettings s;
  s.probe = "/nonexistent/sweep-blas-probe";  // a name is checked before anything runs
  EXPECT_THROW(choose_blas_kernel("SapphireRapids", flags_of(kAvx512Cpuinfo), s), ConfigError);
}

// A fake sweep-blas-probe: reports the kernel it was given (Cooperlake when none), at the
// speed `gflops` gives it, logs each call's OPENBLAS_CORETYPE and OPENBLAS_NUM_THREADS.
class BlasProbeTest : public sweep_test::TempDirTest {
 protected:
  BlasProbeTest() : TempDirTest("blas_kernel_test") {}
  void SetUp() override {
    TempDirTest::SetUp();
    s_.cache_dir = (dir_ / "cache").string();
    s_.timeout_s = 10;
    log_ = (dir_ / "calls.log").string();
  }

  std::string script(const std::string& name, const std::string& body) {
    const std::string path = write_file(dir_ / name, "#!/bin/sh\n" + body);
    ::chmod(path.c_str(), 0755);
    return path;
  }
  // `failing`: kernels whose result is wrong.
  void fake_probe(const std::map<std::string, int>& gflops, const std::string& failing = "") {
    std::string cases;
    for (const auto& [k, g] : gflops) cases += "  " + k + ") g=" + std::to_string(g) + ";;\n";
    s_.probe = script("fake-probe", "echo \"${OPENBLAS_CORETYPE:-unset} threads=$OPENBLAS_NUM_THREADS $1\" >> " + log_ +
                                        "\ncore=${OPENBLAS_CORETYPE:-Cooperlake}\n"
                                        "if [ \"$1\" = --identify ]; then\n"
                                        "  echo \"sweep-blas-probe 1 core=$core build=Fake_0.3.21 lib=/fake.so:1:2\"\n"
                                        "  exit 0\nfi\ng=10\ncase $core in\n" +
                                        cases + "esac\npass=yes\n[ \"$core\" = \"" + failing +
                                        "\" ] && pass=no\n"
                                        "echo \"sweep-blas-probe 1 core=$core pass=$pass err=0.5 "
                                        "gflops=256x64x64:$g,256x256x64:$g,1024x1024x1024:$g hash=0123456789abcdef\"\n"
                                        "[ $pass = yes ]\n");
  }
  std::vector<std::string> calls() {
    std::vector<std::string> out;
    std::istringstream in(read_file(log_));
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }

  BlasSettings s_;
  std::string log_;
};

TEST_F(BlasProbeTest, AutoPicksTheFastestKernelThatPasses) {
  fake_probe({{"Haswell", 70}, {"SkylakeX", 106}, {"Cooperlake", 121}}, "Cooperlake");
  const char* before = std::getenv("OPENBLAS_CORETYPE");
  const std::string env_before = before ? before : "(unset)";
  BlasChoice c = choose_blas_kernel("auto", flags_of(kAvx512Cpuinfo), s_);
  EXPECT_EQ(c.coretype, "SkylakeX");  // Cooperlake is faster but wrong
  EXPECT_EQ(c.kernel, "SkylakeX");
  EXPECT_TRUE(c.verdict.ok());
  EXPECT_DOUBLE_EQ(c.verdict.peak_gflops(), 106);
  // Every probe ran on one thread, and the kernel was set in the child only.
  for (const auto& l : calls()) EXPECT_CONTAINS(l, "threads=1");
  const char* after = std::getenv("OPENBLAS_CORETYPE");
  EXPECT_EQ(after ? after : "(unset)", env_before);

  BlasChoice n = choose_blas_kernel("native", flags_of(kAvx512Cpuinfo), s_);
  EXPECT_EQ(n.coretype, "");  // left to OpenBLAS
  EXPECT_EQ(n.kernel, "Cooperlake");
  EXPECT_CONTAINS(n.verdict.refused, "computed a wrong sgemm");
}

TEST_F(BlasProbeTest, AutoKeepsOpenBlasChoiceUnlessAnotherIsClearlyFaster) {
  // OpenBLAS picked the strongest level the CPU has: kept, after its self-test alone.
  fake_probe({{"Haswell", 90}, {"SkylakeX", 110}, {"Cooperlake", 100}});
  BlasChoice c = choose_blas_kernel("auto", flags_of(kAvx512Cpuinfo), s_);
  EXPECT_EQ(c.coretype, "");
  EXPECT_EQ(c.kernel, "Cooperlake");
  EXPECT_CONTAINS(c.note, "the strongest kernel this CPU runs");
  EXPECT_EQ(calls().size(), 2u);  // identify, then the one self-test: nothing else timed
  // A weaker native within 15% of the fastest: timing noise, and other bits; it stays.
  s_.native_for_test = "Haswell";
  fake_probe({{"Haswell", 100}, {"SkylakeX", 110}, {"Cooperlake", 105}});
  c = choose_blas_kernel("auto", flags_of(kAvx512Cpuinfo), s_);
  EXPECT_EQ(c.coretype, "");
  EXPECT_EQ(c.kernel, "Haswell");
  EXPECT_CONTAINS(c.note, "no kernel that passed its self-test is 15% faster");
  // A masked CPU's fallback at a third of the speed: the fastest kernel that passes.
  s_.native_for_test = "Prescott";
  s_.refresh = true;
  fake_probe({{"Prescott", 31}, {"Haswell", 72}, {"SkylakeX", 106}, {"Cooperlake", 121}});
  c = choose_blas_kernel("auto", flags_of(kAvx512Cpuinfo), s_);
  EXPECT_EQ(c.coretype, "Cooperlake");
  EXPECT_CONTAINS(c.note, "at least 15% faster than OpenBLAS's own choice (Prescott)");
}

TEST_F(BlasProbeTest, VerdictsAreCachedAndReadBack) {
  fake_probe({{"Haswell", 70}, {"Cooperlake", 121}});
  const auto flags = flags_of(kAvx512Cpuinfo);
  BlasSurvey first = survey_blas_kernels(flags, s_);
  EXPECT_FALSE(first.from_cache);
  EXPECT_EQ(first.cache_error, "");
  ASSERT_TRUE(fs::exists(first.cache_file)) << first.cache_file;
  EXPECT_EQ(fs::path(first.cache_file).parent_path(), fs::path(s_.cache_dir));
  const size_t probed = calls().size();
  EXPECT_EQ(probed, 1 + supported_kernels(flags).size());  // identify + each kernel

  BlasSurvey second = survey_blas_kernels(flags, s_);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(calls().size(), probed + 1);  // only identify
  ASSERT_EQ(second.verdicts.size(), first.verdicts.size());
  for (size_t i = 0; i < first.verdicts.size(); ++i) {
    EXPECT_EQ(second.verdicts[i].first, first.verdicts[i].first);
    EXPECT_EQ(second.verdicts[i].second.core, first.verdicts[i].second.core);
    EXPECT_DOUBLE_EQ(second.verdicts[i].second.score(), first.verdicts[i].second.score());
    EXPECT_EQ(second.verdicts[i].second.hash, first.verdicts[i].second.hash);
  }
  // Other flags (another machine) are another key; --refresh probes again.
  EXPECT_FALSE(survey_blas_kernels(flags_of(kAvx2Cpuinfo), s_).from_cache);
  s_.refresh = true;
  EXPECT_FALSE(survey_blas_kernels(flags, s_).from_cache);
}

TEST_F(BlasProbeTest, ACorruptCacheFileIsIgnoredAndRewritten) {
  fake_probe({{"Haswell", 70}});
  const auto flags = flags_of(kAvx2Cpuinfo);
  const std::string file = survey_blas_kernels(flags, s_).cache_file;
  const std::string good = read_file(file);
  for (const std::string& bad : {std::string("garbage\n"), good.substr(0, good.size() / 2) + "\nkernel Haswell x\n",
                                 good + "kernel Haswell sweep-blas-probe 1 core=Haswell pass=maybe\n"}) {
    write_file(file, bad);
    BlasSurvey again = survey_blas_kernels(flags, s_);
    EXPECT_FALSE(again.from_cache) << bad;
    EXPECT_EQ(read_file(file), good) << bad;
    for (const auto& v : again.verdicts) EXPECT_TRUE(v.second.ok()) << v.second.refused;
  }
}

TEST_F(BlasProbeTest, TheUsersCoretypeIsRespectedAndNeverReplacedSilently) {
  fake_probe({{"Haswell", 70}, {"Cooperlake", 121}});
  s_.user_coretype = "haswell";
  BlasChoice c = choose_blas_kernel("auto", flags_of(kAvx512Cpuinfo), s_);
  EXPECT_EQ(c.coretype, "Haswell");
  EXPECT_TRUE(c.verdict.ok());
  EXPECT_CONTAINS(c.note, "OPENBLAS_CORETYPE=haswell is set in the environment: kept");
  EXPECT_EQ(choose_blas_kernel("native", flags_of(kAvx512Cpuinfo), s_).coretype, "Haswell");
  BlasChoice named = choose_blas_kernel("Cooperlake", flags_of(kAvx512Cpuinfo), s_);
  EXPECT_EQ(named.coretype, "Cooperlake");
  EXPECT_CONTAINS(named.note, "replaces OPENBLAS_CORETYPE=haswell");
  s_.user_coretype = "Pentium4";
  try {
    choose_blas_kernel("auto", flags_of(kAvx512Cpuinfo), s_);
    FAIL() << "no error for an unknown OPENBLAS_CORETYPE";
  } catch (const ConfigError& e) {
    EXPECT_CONTAINS(e.what(),
                    "OPENBLAS_CORETYPE (set in the environment): unknown BLAS kernel 'Pentium4'; "
                    "expected one of Prescott");
  }

  // A user's OPENBLAS_CORETYPE never leaks into the probe of OpenBLAS's own choice.
  const char* before = std::getenv("OPENBLAS_CORETYPE");
  const std::string saved = before ? before : "";
  ::setenv("OPENBLAS_CORETYPE", "Prescott", 1);
  ProbeReport own = run_blas_probe(s_, "");
  if (before)
    ::setenv("OPENBLAS_CORETYPE", saved.c_str(), 1);
  else
    ::unsetenv("OPENBLAS_CORETYPE");
  EXPECT_EQ(own.core, "Cooperlake");
}

TEST_F(BlasProbeTest, AKernelKilledBySigillIsRefusedWithOneLine) {
  s_.probe = script("sigill-probe", "kill -ILL $$\n");
  ProbeReport r = run_blas_probe(s_, "SkylakeX");
  EXPECT_FALSE(r.ok());
  EXPECT_CONTAINS(r.refused, "refused: the self-test of kernel SkylakeX was killed by signal 4");
  EXPECT_CONTAINS(r.refused, "this CPU cannot run it");
  EXPECT_EQ(r.refused.find('\n'), std::string::npos);
}

TEST_F(BlasProbeTest, AKernelTheFlagsLackIsRefusedWithoutRunningIt) {
  fake_probe({});
  BlasChoice c = choose_blas_kernel("SkylakeX", flags_of(kSse3Cpuinfo), s_);
  EXPECT_EQ(c.kernel, "SkylakeX");
  EXPECT_CONTAINS(c.verdict.refused, "refused: kernel SkylakeX needs CPU flags ssse3, sse4_1");
  EXPECT_CONTAINS(c.verdict.refused, "avx512f");
  EXPECT_TRUE(calls().empty());
}

TEST_F(BlasProbeTest, WrongResultsTimeoutsAndMissingKernelsAreRefused) {
  s_.probe = script("wrong",
                    "echo 'sweep-blas-probe 1 core=Haswell pass=no err=7.5 gflops=1x1x1:1 hash=0123456789abcdef'\n"
                    "exit 1\n");
  EXPECT_CONTAINS(run_blas_probe(s_, "Haswell").refused, "kernel Haswell computed a wrong sgemm (error 7.5 times");
  s_.probe = script("crash", "echo 'cblas: bad thing' >&2\nexit 3\n");
  EXPECT_EQ(run_blas_probe(s_, "Haswell").refused,
            "refused: the self-test of kernel Haswell ended with exit code 3: cblas: bad thing");
  s_.probe = script("other",
                    "echo 'sweep-blas-probe 1 core=Cooperlake pass=yes err=0 gflops=1x1x1:1 hash=0123456789abcdef'\n");
  EXPECT_CONTAINS(run_blas_probe(s_, "SapphireRapids").refused,
                  "OpenBLAS ran kernel Cooperlake when asked for SapphireRapids");
  s_.probe = script("slow", "exec sleep 30\n");
  s_.timeout_s = 0.3;
  EXPECT_CONTAINS(run_blas_probe(s_, "Haswell").refused, "did not finish for kernel Haswell in 0.3 s");
  s_.probe = (dir_ / "missing").string();
  EXPECT_THROW(run_blas_probe(s_, "Haswell"), std::runtime_error);
}

// The real sweep-blas-probe, built next to the tests' binaries.
class RealProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    s_.probe = std::string(SWEEP_BIN_DIR) + "/sweep-blas-probe";
    if (!fs::exists(s_.probe)) GTEST_SKIP() << "not built: " << s_.probe;
  }
  static void expect_sane(const ProbeReport& r) {
    EXPECT_TRUE(r.ok()) << r.refused;
    EXPECT_TRUE(r.pass);
    EXPECT_LE(r.err, 1.0);
    ASSERT_EQ(r.speeds.size(), 3u);
    EXPECT_EQ(r.speeds[0].shape, "256x64x64");
    EXPECT_EQ(r.speeds[2].shape, "1024x1024x1024");
    for (const auto& sp : r.speeds) EXPECT_GT(sp.gflops, 0.1) << sp.shape;
    EXPECT_EQ(r.hash.size(), 16u);
  }
  BlasSettings s_;
};

TEST_F(RealProbeTest, NativeAndHaswellPassTheirSelfTest) {
  ProbeReport id = run_blas_probe(s_, "", true);
  ASSERT_TRUE(id.ok()) << id.refused;
  EXPECT_CONTAINS(id.library, "DYNAMIC_ARCH");
  EXPECT_EQ(id.library.find(id.core), std::string::npos) << "the core name is not part of the library's identity";
  ProbeReport native = run_blas_probe(s_, "");
  expect_sane(native);
  EXPECT_EQ(native.core, id.core);
  if (!missing_cpu_flags(*find_blas_kernel("Haswell"), parse_cpu_flags(read_cpuinfo())).empty())
    GTEST_SKIP() << "this CPU cannot run Haswell";
  ProbeReport haswell = run_blas_probe(s_, "Haswell");
  expect_sane(haswell);
  EXPECT_EQ(haswell.core, "Haswell");
  // The same kernel gives the same bits.
  EXPECT_EQ(run_blas_probe(s_, "Haswell").hash, haswell.hash);
}

}  // namespace
}  // namespace sweep
