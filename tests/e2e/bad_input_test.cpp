// The bad-input contract, over the whole corpus in tests/data/bad/ (MANIFEST.tsv says
// what each file must give): the documented exit code, nothing on stdout, exactly one
// line on stderr naming the file and its line or key, and no file or directory created.
//
// `bad_input_test --write-record-cases DIR` regenerates the corpus's r_*.h5 files.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "e2e_util.h"  // TempDirTest, run_cli_split, expect_one_error_line, listing, bin
#include "hdf5_c.h"    // damages records for the corpus
#include "record.h"    // RecordWriter

namespace fs = std::filesystem;

namespace {

using sweep_test::bin;
using sweep_test::listing;
using sweep_test::read_file;

const fs::path kCorpus = fs::path(SWEEP_SOURCE_DIR) / "tests" / "data" / "bad";

/// One row of MANIFEST.tsv.
struct Case {
  std::string file, kind;  ///< kind: grid | config | record
  int exit = 0;
  std::string names;    ///< what the line must name besides `message`: file, line, key (joined by +)
  std::string message;  ///< a substring of the one error line
  int row = 0;
};

std::vector<Case> load_manifest() {
  std::vector<Case> out;
  std::ifstream in(kCorpus / "MANIFEST.tsv");
  std::string line;
  for (int row = 1; std::getline(in, line); ++row) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, '\t');) f.push_back(x);
    if (f.size() != 5) {
      ADD_FAILURE() << "MANIFEST.tsv:" << row << ": expected 5 tab-separated fields, got " << f.size();
      continue;
    }
    out.push_back({f[0], f[1], std::stoi(f[2]), f[3], f[4], row});
  }
  return out;
}

class BadInput : public sweep_test::TempDirTest {
 protected:
  BadInput() : TempDirTest("sweep_bad_input", sweep_test::Cleanup::unless_failed) {}

  /// Runs one command of case `c` on a private copy of its file and checks the contract.
  void check(const Case& c, const std::vector<std::string>& argv, const std::string& what) {
    SCOPED_TRACE("MANIFEST.tsv:" + std::to_string(c.row) + ": " + c.file + " (" + what + ")");
    const fs::path work = dir_ / ("case" + std::to_string(c.row) + "_" + what), logs = work.string() + ".logs";
    fs::create_directories(work);
    fs::create_directories(logs);
    // Kinds with a suffix make a special file that git cannot hold: -dir a directory
    // named FILE, -fifo a FIFO (data.fifo beside the committed config, or FILE itself),
    // -symlink an `out/record.h5.partial` link to a file outside `out` that must stay
    // untouched.
    const std::string special = c.kind.find('-') == std::string::npos ? "" : c.kind.substr(c.kind.find('-') + 1);
    if (special == "dir") {
      fs::create_directories(work / c.file);
    } else if (special == "fifo" && c.kind.rfind("record", 0) == 0) {
      ASSERT_EQ(::mkfifo((work / c.file).c_str(), 0644), 0);
    } else {
      fs::copy_file(kCorpus / c.file, work / c.file);
    }
    if (special == "fifo" && c.kind.rfind("config", 0) == 0) ASSERT_EQ(::mkfifo((work / "data.fifo").c_str(), 0644), 0);
    if (special == "symlink") {
      fs::create_directories(work / "out");
      std::ofstream(work / "victim") << "precious";
      fs::create_symlink("../victim", work / "out" / "record.h5.partial");
    }
    const auto before = listing(work);
    const sweep_test::CliResult o = sweep_test::run_cli_split(argv, work, logs);
    sweep_test::expect_one_error_line(o, c.exit);
    EXPECT_NE(o.err.find(c.message), std::string::npos) << "expected '" << c.message << "' in: " << o.err;
    std::stringstream names(c.names);
    for (std::string n; std::getline(names, n, '+');) {
      if (n == "file") {
        EXPECT_NE(o.err.find(c.file), std::string::npos) << "the line does not name the file: " << o.err;
      } else if (n == "line") {
        EXPECT_TRUE(std::regex_search(
            o.err, std::regex(std::regex_replace(c.file, std::regex(R"([.+])"), R"(\$&)") + ":[0-9]+:")))
            << "the line does not name file:line: " << o.err;
      } else if (n == "key") {
        EXPECT_NE(o.err.find("key '"), std::string::npos) << "the line does not name a key: " << o.err;
      } else {
        ADD_FAILURE() << "unknown names token '" << n << "'";
      }
    }
    EXPECT_EQ(listing(work), before) << "the command created files in its working directory";
    if (special == "symlink") EXPECT_EQ(read_file(work / "victim"), "precious") << "written through the planted link";
  }
};

TEST_F(BadInput, EveryCaseInTheCorpusFailsCleanly) {
  const std::vector<Case> cases = load_manifest();
  EXPECT_GE(cases.size(), 30u);
  std::set<std::string> listed;
  for (const Case& c : cases) {
    listed.insert(c.file);
    const bool made = c.kind == "config-dir" || c.kind == "grid-dir" || c.kind == "record-fifo";
    if (!made) ASSERT_TRUE(fs::exists(kCorpus / c.file)) << "MANIFEST.tsv:" << c.row << ": no such file " << c.file;
    if (c.kind.rfind("grid", 0) == 0) {
      check(c, {bin("sweep"), "plan", c.file, "--out", "out"}, "plan");
      check(c, {bin("sweep"), "run", c.file, "--out", "out", "--quiet"}, "run");
    } else if (c.kind.rfind("config", 0) == 0) {
      check(c, {bin("sweep-train"), "--config", c.file, "--out", "out"}, "train");
    } else if (c.kind.rfind("record", 0) == 0) {
      check(c, {bin("sweep"), "compare", c.file, c.file}, "compare");
    } else {
      ADD_FAILURE() << "MANIFEST.tsv:" << c.row << ": unknown kind '" << c.kind << "'";
    }
  }
  // Every case file is in the manifest, so none is silently skipped.
  for (const auto& e : fs::directory_iterator(kCorpus)) {
    const std::string name = e.path().filename().string();
    if (name != "MANIFEST.tsv" && name != ".gitignore") {
      EXPECT_TRUE(listed.count(name)) << name << " is not in MANIFEST.tsv";
    }
  }
}

// ----------------------------------------------------------------- helper modes

/// Opens `path` read-write, lets `edit` change it with the HDF5 C API, closes it.
template <class Edit>
void edit_h5(const fs::path& path, Edit edit) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (f < 0) throw std::runtime_error(path.string() + ": cannot open");
  edit(f);
  H5Fclose(f);
}

void set_i64_attr(hid_t obj, const char* name, int64_t v) {
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  H5Awrite(a, H5T_NATIVE_INT64, &v);
  H5Aclose(a);
}

/// Replaces string dataset `name` under `group` with `values`.
void set_strings(hid_t f, const char* group, const char* name, const std::vector<const char*>& values) {
  hid_t g = H5Gopen2(f, group, H5P_DEFAULT);
  H5Ldelete(g, name, H5P_DEFAULT);
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  hsize_t n = values.size();
  hid_t s = H5Screate_simple(1, &n, nullptr);
  hid_t d = H5Dcreate2(g, name, t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
  H5Dclose(d), H5Sclose(s), H5Tclose(t), H5Gclose(g);
}

/// The corpus's damaged records, each a small valid record changed in one way.
int write_record_cases(const fs::path& dir) {
  const fs::path good = dir / "good.tmp.h5";
  fs::remove(good);
  {
    sweep::RecordHeader h;
    h.run_id = "0123456789abcdef";
    h.config_yaml = "train:\n  steps: 1\n";
    h.config = {{"train.steps", "1"}};
    h.params = {{"w", {2, 3}, 0, 6}, {"b", {3}, 6, 3}};
    // No rows: each appended row would allocate whole chunks, and the files are committed.
    sweep::RecordWriter w(good.string(), h);
    w.finish("completed");
  }
  auto variant = [&](const char* name, auto edit) {
    fs::copy_file(good, dir / name, fs::copy_options::overwrite_existing);
    edit_h5(dir / name, edit);
  };
  variant("r_future_version.h5", [](hid_t f) { set_i64_attr(f, "schema_version", sweep::kSchemaVersion + 1); });
  variant("r_version_zero.h5", [](hid_t f) { set_i64_attr(f, "schema_version", 0); });
  variant("r_missing_config.h5", [](hid_t f) { H5Ldelete(f, "config", H5P_DEFAULT); });
  variant("r_missing_metric.h5", [](hid_t f) { H5Ldelete(f, "metrics/loss", H5P_DEFAULT); });
  variant("r_bad_param_shape.h5", [](hid_t f) { set_strings(f, "params", "shape", {"2x3", "3xQ"}); });
  variant("r_short_param_table.h5", [](hid_t f) { set_strings(f, "params", "shape", {"2x3"}); });
  // Cut in half: the superblock is there, the objects it points to are not.
  const std::string bytes = read_file(good);
  std::ofstream(dir / "r_truncated.h5", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  std::ofstream(dir / "r_not_hdf5.h5") << "this is a text file, not HDF5\n";
  std::ofstream(dir / "r_empty.h5", std::ios::binary);
  // HDF5 but not a record; and a partial that is not one either (compare reads a real
  // partial record as evidence, and refuses this one for what it holds).
  H5Fclose(H5Fcreate((dir / "r_no_schema_version.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  fs::copy_file(dir / "r_no_schema_version.h5", dir / "r_unfinished.h5.partial", fs::copy_options::overwrite_existing);
  fs::remove(good);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--write-record-cases") return write_record_cases(argv[2]);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
