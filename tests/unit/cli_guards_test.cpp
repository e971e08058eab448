// Library-level guards behind `sweep`'s bad-input checks: one YAML document per grid
// file, grid paths that are directories or FIFOs, the stated name limit, invisible
// characters escaped in quoted keys, and the signature each report format carries so
// that `sweep report -o` replaces only its own files. tests/e2e/cli_guards_e2e_test.cpp
// drives the same guards through the real binary.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "grid.h"       // parse_grid, load_grid
#include "plan.h"       // check_data_files
#include "report.h"     // render_report, looks_like_report
#include "temp_dir.h"   // TempDirTest
#include "test_util.h"  // EXPECT_CONTAINS, thrown_message, passes_in_child

namespace fs = std::filesystem;

namespace {

std::string parse_error(const std::string& text) {
  return sweep_test::thrown_message<sweep::ConfigError>([&] { sweep::parse_grid(text, "g.yaml"); }, "(no error)");
}

std::string load_error(const std::string& path) {
  return sweep_test::thrown_message<sweep::ConfigError>([&] { sweep::load_grid(path); }, "(no error)");
}

class GridFile : public sweep_test::TempDirTest {
 protected:
  GridFile() : TempDirTest("cli_guards") {}
};

TEST(GridDocuments, ASecondYamlDocumentIsAnErrorAtItsLine) {
  EXPECT_EQ(parse_error("name: a\ngrid:\n  train.lr: [0.1]\n---\nname: b\n"),
            "g.yaml:4: holds 2 YAML documents; a grid is one (the second starts on this line)");
  // An explicit start of the first document is one document; its second `---` is not.
  EXPECT_CONTAINS(parse_error("---\nname: a\n---\n"), "g.yaml:3: holds 2 YAML documents");
  EXPECT_CONTAINS(parse_error("# c\nname: a\n...\nname: b\n"), "g.yaml:4: holds 2 YAML documents");
  EXPECT_CONTAINS(parse_error("name: a\n---\nname: b\n---\nname: c\n"), "g.yaml:2: holds 3 YAML documents");
  EXPECT_EQ(parse_error("---\nname: a\n...\n"), "(no error)");
}

TEST_F(GridFile, ADirectoryIsNamedAsOneAndAMissingFileKeepsItsMessage) {
  EXPECT_EQ(load_error(dir_.string()), dir_.string() + ": is a directory, expected a grid file");
  EXPECT_EQ(load_error((dir_ / "nope.yaml").string()), (dir_ / "nope.yaml").string() + ": cannot open the grid file");
}

TEST_F(GridFile, AFifoIsRefusedWithoutWaitingForAWriter) {
  const std::string fifo = (dir_ / "grid.yaml").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // In a child: opening a FIFO for reading blocks until a writer comes, which would hang
  // this test; given up after 10 s.
  const auto got = sweep_test::passes_in_child(
      [&] { return load_error(fifo) == fifo + ": not a regular file, expected a grid file"; }, 10);
  EXPECT_NE(got, sweep_test::ChildCheck::timed_out) << "load_grid on a FIFO blocked for 10 s";
  EXPECT_EQ(got, sweep_test::ChildCheck::passed) << "wrong or no error for a FIFO";
}

TEST(GridDocuments, InputThatMadeYamlCppLoadAllLoopForeverReturns) {
  // Found by the grid fuzzer: yaml-cpp 0.7's LoadAll never returned on this input, so
  // counting documents must not use it. In a child, given up after 10 s.
  const auto got = sweep_test::passes_in_child(
      [] { return parse_error("',)',)aa").find("expected a mapping") != std::string::npos; }, 10);
  EXPECT_NE(got, sweep_test::ChildCheck::timed_out) << "parse_grid did not return within 10 s";
  EXPECT_EQ(got, sweep_test::ChildCheck::passed) << "wrong or no error";
}

TEST(GridName, TheLengthLimitIsInTheMessage) {
  const std::string long_name(129, 'a');
  EXPECT_CONTAINS(parse_error("name: " + long_name + "\n"), "a name is 1 to 128 characters, this one 129");
  EXPECT_CONTAINS(parse_error("name: a/b\n"), "got 'a/b'; a name is 1 to 128 characters");
  EXPECT_EQ(parse_error("name: " + std::string(128, 'a') + "\n"), "(no error)");
}

TEST(InvisibleCharacters, AreEscapedWhereKeysAreQuoted) {
  // U+200B ZERO WIDTH SPACE after the key: it would print as 'train.lr' twice.
  EXPECT_CONTAINS(parse_error("name: a\ngrid:\n  train.lr\u200b: [0.1]\n"),
                  "unknown key 'train.lr\\u{200b}' (did you mean 'train.lr'?)");
  EXPECT_CONTAINS(parse_error("name: a\nbase:\n  train: {\u2066lr: 0.1}\n"), "unknown key 'train.\\u{2066}lr'");
  EXPECT_CONTAINS(parse_error("name: a\nconstr\ufeffaints: {}\n"),
                  "unknown top-level key 'constr\\u{feff}aints' (did you mean 'constraints'?)");
  EXPECT_CONTAINS(parse_error("name: a\nlaunch: {par\u00adallel: 2}\n"), "unknown key 'launch.par\\u{ad}allel'");
  EXPECT_CONTAINS(parse_error("name: a\nbase:\n  tr\u202eain: {}\n"), "unknown section 'base.tr\\u{202e}ain'");
  EXPECT_EQ(sweep::printable("a\u2060b\u200fc\u0085d\x1b"), "a\\u{2060}b\\u{200f}c\\u{85}d\\x1b");
  EXPECT_EQ(sweep::printable("caf\u00e9 \u4e2d"), "caf\u00e9 \u4e2d");  // visible text stays as it is
}

TEST(ReportSignature, EachFormatIsRecognisedOnlyAsItself) {
  sweep::SweepRecords none;
  const sweep::ReportModel m = sweep::build_report("t", none);
  using F = sweep::ReportFormat;
  for (F f : {F::html, F::markdown, F::csv, F::json}) {
    const std::string text = sweep::render_report(none, m, f);
    for (F g : {F::html, F::markdown, F::csv, F::json})
      EXPECT_EQ(sweep::looks_like_report(text, g), f == g) << int(f) << " read as " << int(g) << ":\n" << text;
  }
  EXPECT_FALSE(sweep::looks_like_report(std::string("\x89HDF\r\n\x1a\n", 8), F::html));
  EXPECT_FALSE(sweep::looks_like_report("# my notes\n\nkeep this\n", F::markdown));
  EXPECT_FALSE(sweep::looks_like_report("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n", F::html));
  EXPECT_FALSE(sweep::looks_like_report("run_id,status,mine\r\n", F::csv));
  EXPECT_FALSE(sweep::looks_like_report("{\"format\":\"other\"}", F::json));
  EXPECT_FALSE(sweep::looks_like_report("", F::html));
}

}  // namespace

namespace {

TEST(DataFiles, AMissingFileStopsALocalSweepAndIsANoteWhereRunsStartElsewhere) {
  const std::string grid =
      "name: d\n"
      "base:\n"
      "  data: {kind: text, path: /nonexistent/sweep-test-data.txt}\n"
      "grid:\n"
      "  train.seed: [0, 1]\n";
  sweep::SweepSpec local = sweep::parse_grid(grid, "d.yaml");
  auto points = sweep::expand_grid(local).points;
  try {
    sweep::check_data_files(local, points);
    ADD_FAILURE() << "a missing data file passed";
  } catch (const sweep::ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("d.yaml: key 'data.path' of point 1 of 2 (train.seed=0): '/nonexistent/sweep-test-data.txt': "
                       "No such file or directory"),
              std::string::npos)
        << msg;
  }
  sweep::SweepSpec slurm = sweep::parse_grid(grid + "launch: {launcher: slurm}\n", "d.yaml");
  const auto notes = sweep::check_data_files(slurm, sweep::expand_grid(slurm).points);
  ASSERT_EQ(notes.size(), 1u);  // one note per path, not per point
  EXPECT_NE(notes[0].find("on this machine; the run's node checks it when it starts"), std::string::npos) << notes[0];
  // Synthetic data names no file; a directory is not a data file.
  EXPECT_TRUE(sweep::check_data_files(sweep::parse_grid("name: s\n", "s.yaml"),
                                      sweep::expand_grid(sweep::parse_grid("name: s\n", "s.yaml")).points)
                  .empty());
  sweep::SweepSpec dir = sweep::parse_grid("name: d\nbase:\n  data: {kind: tokens, path: /}\n", "d.yaml");
  EXPECT_THROW(sweep::check_data_files(dir, sweep::expand_grid(dir).points), sweep::ConfigError);
}

}  // namespace
