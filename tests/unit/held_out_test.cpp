// Held-out data (data.eval_fraction, data.eval_path): which sequences are held out, that no
// token is both trained on and evaluated, and the fixed order evaluations read them in.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "data_source.h"

namespace sweep {
namespace {

/// A uint16 tokens file whose token at position i is i: a sequence tells where it came from.
std::string positions_file(const char* name, int64_t n) {
  const std::string path = ::testing::TempDir() + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  for (int64_t i = 0; i < n; ++i) {
    const unsigned char b[2] = {static_cast<unsigned char>(i & 0xff), static_cast<unsigned char>(i >> 8)};
    std::fwrite(b, 1, 2, f);
  }
  std::fclose(f);
  return path;
}

RunConfig tokens_config(const std::string& path) {
  RunConfig c;
  c.data.kind = "tokens";
  c.data.path = path;
  c.model.vocab = 65536;
  c.model.seq_len = 8;
  return c;
}

/// Every token position the sequences of `s` read.
std::set<int64_t> positions(const TokenSource& s, int64_t len) {
  std::set<int64_t> out;
  std::vector<int64_t> buf(static_cast<size_t>(len));
  for (int64_t i = 0; i < s.samples(); ++i) {
    s.sequence(i, len, buf.data());
    out.insert(buf.begin(), buf.end());
  }
  return out;
}

TEST(HeldOut, AFileHoldsOutItsLastWindowsAndNoTokenIsInBoth) {
  RunConfig c = tokens_config(positions_file("held_out_tokens.bin", 801));  // 100 windows of 8 (+1)
  c.data.eval_fraction = 0.1;
  std::shared_ptr<const TokenSource> all = open_token_source(c);
  ASSERT_EQ(all->samples(), 100);
  const DataSplit split = split_held_out(all, c);
  ASSERT_TRUE(split.eval);
  EXPECT_EQ(split.eval->samples(), 10);
  EXPECT_EQ(split.train->samples(), 89) << "training stops one window short of the held-out windows";
  const std::set<int64_t> train = positions(*split.train, 9), eval = positions(*split.eval, 9);
  for (int64_t p : eval) EXPECT_EQ(train.count(p), 0u) << "token position " << p << " is trained on and evaluated";
  EXPECT_EQ(*eval.begin(), 90 * 8) << "the held-out windows are the file's last";
  EXPECT_EQ(*eval.rbegin(), 800);
  EXPECT_NE(split.eval->describe().find("held out"), std::string::npos) << split.eval->describe();
}

TEST(HeldOut, SyntheticDataHoldsOutSequencesPastItsSamplesAndTrainsAsBefore) {
  RunConfig c;
  c.data.samples = 64;
  c.data.eval_fraction = 0.25;
  std::shared_ptr<const TokenSource> all = open_token_source(c);
  const DataSplit split = split_held_out(all, c);
  EXPECT_EQ(split.train, all) << "the training data is unchanged";
  ASSERT_TRUE(split.eval);
  ASSERT_EQ(split.eval->samples(), 16);
  std::vector<int64_t> a(33), b(33);
  for (int64_t i = 0; i < 16; ++i) {
    split.eval->sequence(i, 33, a.data());
    all->sequence(64 + i, 33, b.data());
    EXPECT_EQ(a, b) << "held-out sequence " << i << " is sequence " << 64 + i << " of the chain";
  }
}

TEST(HeldOut, AHeldOutFileIsReadWholeAndTrainingKeepsAllOfItsOwn) {
  RunConfig c = tokens_config(positions_file("held_out_train.bin", 801));
  c.data.eval_path = positions_file("held_out_eval.bin", 161);  // 20 windows
  std::shared_ptr<const TokenSource> all = open_token_source(c);
  const DataSplit split = split_held_out(all, c);
  EXPECT_EQ(split.train, all);
  ASSERT_TRUE(split.eval);
  EXPECT_EQ(split.eval->samples(), 20);
}

TEST(HeldOut, WithoutHeldOutDataThereIsNoEvalSource) {
  RunConfig c;
  std::shared_ptr<const TokenSource> all = open_token_source(c);
  const DataSplit split = split_held_out(all, c);
  EXPECT_EQ(split.train, all);
  EXPECT_FALSE(split.eval);
}

TEST(HeldOut, HoldingOutEverythingIsAConfigErrorNamingTheKey) {
  RunConfig c = tokens_config(positions_file("held_out_small.bin", 25));  // 3 windows
  c.data.eval_fraction = 0.5;                                             // 2 held out + 1 at the boundary
  try {
    split_held_out(open_token_source(c), c);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("data.eval_fraction"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("none to train on"), std::string::npos) << e.what();
  }
  // A missing held-out file names its own key.
  RunConfig d = tokens_config(positions_file("held_out_ok.bin", 801));
  d.data.eval_path = ::testing::TempDir() + "no_such_held_out.bin";
  try {
    split_held_out(open_token_source(d), d);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("key 'data.eval_path'"), std::string::npos) << e.what();
  }
}

TEST(HeldOut, EvaluationBatchesReadEachHeldOutSequenceOnceInAFixedOrder) {
  RunConfig c = tokens_config(positions_file("held_out_order.bin", 801));
  c.data.eval_fraction = 0.2;  // 20 windows held out
  c.train.micro_batch = 2;
  const DataSplit split = split_held_out(open_token_source(c), c);
  // 2 batches of 4 global micro-batches of 2 rows: the first 16 held-out sequences, once each,
  // whichever layout (world x accum = 4) computes them.
  std::vector<int64_t> rows(2 * 9), starts;
  for (int64_t batch = 0; batch < 2; ++batch)
    for (int64_t j = 0; j < 4; ++j) {
      fill_eval(*split.eval, c, batch, j, 4, rows.data());
      starts.push_back(rows[0]), starts.push_back(rows[9]);
    }
  for (size_t i = 0; i < starts.size(); ++i) EXPECT_EQ(starts[i], (80 + int64_t(i)) * 8) << "row " << i;
}

}  // namespace
}  // namespace sweep
