// A fresh directory to work in, removed afterwards: TempDir for a scope (or a whole
// suite), TempDirTest as the base of a fixture whose every test gets its own (dir_).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>  // mkdtemp

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

namespace sweep_test {

/// A new, empty directory <temp>/<prefix>XXXXXX (mkdtemp), removed with everything in it
/// when this goes out of scope, unless keep() was called.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix) {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp " + tmpl + ": " + std::strerror(errno));
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!keep_) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  /// Leaves the directory in place, to be looked at.
  void keep() { keep_ = true; }

 private:
  std::filesystem::path path_;
  bool keep_ = false;
};

/// What becomes of a test's directory when the test ends.
enum class Cleanup {
  always,         ///< removed, passed or failed
  unless_failed,  ///< a failed test's directory stays, and its path is printed
};

/// Base of fixtures whose tests each work in a fresh directory, dir_, named after the
/// test: <temp>/<prefix>_<test name>_XXXXXX. A fixture that overrides SetUp or TearDown
/// calls this one's too (SetUp first, TearDown last).
class TempDirTest : public ::testing::Test {
 protected:
  explicit TempDirTest(std::string prefix, Cleanup cleanup = Cleanup::always)
      : prefix_(std::move(prefix)), cleanup_(cleanup) {}

  void SetUp() override {
    std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : test)
      if (c == '/') c = '_';  // parameterized tests: Name/0
    tmp_ = std::make_unique<TempDir>(prefix_ + "_" + test + "_");
    dir_ = tmp_->path();
  }
  void TearDown() override {
    if (tmp_ && cleanup_ == Cleanup::unless_failed && HasFailure()) {
      tmp_->keep();
      std::printf("kept the failed test's directory: %s\n", dir_.c_str());
    }
    tmp_.reset();
  }

  std::filesystem::path dir_;

 private:
  std::string prefix_;
  Cleanup cleanup_;
  std::unique_ptr<TempDir> tmp_;
};

}  // namespace sweep_test
