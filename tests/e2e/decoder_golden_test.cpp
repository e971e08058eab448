// The built-in decoder trains the bits it trained before the model registry existed
// (issue 14: "the seam costs nothing"). tests/data/*_golden.tsv hold, per run, the run id,
// the final step, the final parameter checksum and the final loss's bits for
// sweeps/quickstart.yaml and tests/data/golden_variants.yaml (MoE, fp16 emulated with its
// scaler, bf16 autocast), trained with the OpenBLAS kernel the file names (Haswell: every
// CPU with AVX2 runs it, so the bits do not depend on the machine's own choice). The
// first values were recorded by the build before the registry (commit cdb9dd0) with the
// Cooperlake kernel; the Haswell values were recorded by a build that still trained those
// Cooperlake bits (CI of c22f45d), so the chain back to cdb9dd0 holds. They are trained
// with oneDNN off (SWEEP_ONEDNN=0), as on a CPU without AVX-512, where LibTorch never uses
// it for bf16: with it, an AVX-512 BF16 CPU trains other bf16 bits.
// A changed run id means the canonical config text changed; a changed checksum or loss
// means the model, the loop or the numerics did.
#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "e2e_util.h"  // E2eTest, completed_records

namespace {

struct Golden {
  int64_t final_step = 0;
  uint64_t params = 0, loss_bits = 0;
};

/// The rows of a golden file, and the OpenBLAS kernel they were trained with (its
/// "# kernel: NAME" line): each kernel gives other bits, so the runs pin it.
std::map<std::string, Golden> read_golden(const std::string& path, std::string* kernel) {
  std::map<std::string, Golden> out;
  std::ifstream in(path);
  const std::string mark = "# kernel: ";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(mark, 0) == 0) *kernel = line.substr(mark.size());
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    std::string id, step, params, loss;
    f >> id >> step >> params >> loss;
    out[id] = {std::stoll(step), std::stoull(params, nullptr, 16), std::stoull(loss, nullptr, 16)};
  }
  return out;
}

namespace fs = std::filesystem;

/// Whether /proc/cpuinfo lists `flag` for the CPU.
bool cpu_has(const std::string& flag) {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("flags", 0) == 0) return (line + " ").find(" " + flag + " ") != std::string::npos;
  return false;
}

class DecoderGolden : public sweep_test::E2eTest {
 protected:
  DecoderGolden() : E2eTest("decoder_golden") {}

  /// Runs `grid` and compares every record with `golden`.
  void expect_golden(const std::string& grid, const std::string& golden) {
    std::string kernel;
    const auto want = read_golden(std::string(SWEEP_SOURCE_DIR) + "/" + golden, &kernel);
    ASSERT_FALSE(want.empty()) << golden;
    ASSERT_EQ(kernel, "Haswell") << golden << ": its '# kernel:' line names the kernel its bits need";
    if (!cpu_has("avx2")) GTEST_SKIP() << "the golden bits need OpenBLAS's Haswell kernel (AVX2); this CPU has no AVX2";
    // The grid as shipped, with its runs pinned to the golden file's kernel (launch
    // settings are not part of a run id, so the ids stay the shipped grid's).
    std::ifstream in(std::string(SWEEP_SOURCE_DIR) + "/" + grid);
    std::stringstream text;
    text << in.rdbuf() << "launch: {blas: " << kernel << "}\n";
    const std::string pinned = write(fs::path(grid).filename().string(), text.str());
    // oneDNN off: it picks bf16 kernels by the CPU's instruction set (AVX-512 BF16 or not),
    // which no setting pins; the trainers inherit this.
    ::setenv("SWEEP_ONEDNN", "0", 1);
    const auto out = dir_ / "out";
    ASSERT_TRUE(sweep_cli({"run", pinned, "--out", out.string()}, "run.log").ok()) << read("run.log");
    ::unsetenv("SWEEP_ONEDNN");
    const auto got = sweep_test::completed_records(out);
    ASSERT_EQ(got.size(), want.size()) << read("run.log");
    for (const auto& [id, g] : want) {
      ASSERT_TRUE(got.count(id)) << "run id " << id << " is gone: the canonical config text changed";
      const sweep::Record& r = got.at(id);
      ASSERT_FALSE(r.checksums.empty());
      ASSERT_FALSE(r.steps.empty());
      EXPECT_EQ(r.checksums.back().step, g.final_step) << id;
      EXPECT_EQ(r.checksums.back().params, g.params) << id << ": the final parameters differ";
      uint64_t bits = 0;
      std::memcpy(&bits, &r.steps.back().loss, sizeof bits);
      EXPECT_EQ(bits, g.loss_bits) << id << ": the final loss differs";
    }
  }
};

TEST_F(DecoderGolden, QuickstartTrainsTheBitsItTrainedBefore) {
  expect_golden("sweeps/quickstart.yaml", "tests/data/quickstart_golden.tsv");
}

TEST_F(DecoderGolden, MoeFp16AndBf16TrainTheBitsTheyTrainedBefore) {
  expect_golden("tests/data/golden_variants.yaml", "tests/data/golden_variants.tsv");
}

}  // namespace
