// results/record/record_cache.h: the keyed cache of decoded records that sweep-wide readers
// (report, compare, export) use instead of reading every HDF5 record again.
#include "record_cache.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "record.h"

namespace fs = std::filesystem;
using sweep::FileIdentity;
using sweep::Record;
using sweep::RecordCache;

namespace {

/// A record with every field set, each to a value of its own.
Record every_field() {
  Record r;
  r.schema_version = 6;
  r.run_id = "0123456789abcdef", r.sweep_id = "sweep", r.status = "completed", r.failure = "none";
  r.config_yaml = "train:\n  lr: 0.1\n";
  r.config = {{"train.lr", "0.1"}, {"train.seed", "7"}};
  r.environment = {{"host", "node1"}, {"program", "prog"}};
  for (int i = 1; i <= 3; ++i) {
    sweep::StepMetrics m;
    m.step = i, m.loss = 1.0 / i, m.lr = 0.1, m.grad_norm = NAN, m.clip_coef = 0.5, m.loss_scale = 2;
    m.skipped = i == 2, m.tokens = 8 * i, m.unused_params = 1, m.step_time_s = 0.01 * i, m.tokens_per_s = 800;
    m.record_time_s = 1e-4;
    r.steps.push_back(m);
  }
  r.evals = {{3, 0.7, 64, 0.02}};
  r.step_extra = {{"accuracy", {0.1, NAN, 0.3}}};
  r.eval_extra = {{"eval_accuracy", {0.4}}};
  r.checksums = {{0, 11, {1, 2}}, {3, 12, {3, 4}}};
  r.params = {{"w", {2, 2}, 0, 4}, {"b", {2}, 4, 2}};
  r.world_size = 2;
  r.lineage = {"forked", "fedcba9876543210", 2};
  r.rank_step_time_s = {{0.1, 0.2}, {0.3, 0.4}, {0.5, 0.6}};
  r.rank_grad_norm = {{1.5, NAN}};
  r.telemetry = {{3, "last,spike", {0.25, 0.5}, {5, 3}}};
  r.moe_layers = 1, r.moe_experts = 2;
  r.memory = {{1, 2}, {3, 4}, {5, 6}, {7, -1}, {8, 9}};
  r.summary = {{"health", "ok"}};
  r.digest = "d1", r.computed_digest = "c1", r.verified = true;  // (each its own value)
  return r;
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

/// Where `a` and `b` differ, field by field ("" when they do not).
std::string difference(const Record& a, const Record& b) {
  if (a.schema_version != b.schema_version || a.run_id != b.run_id || a.sweep_id != b.sweep_id ||
      a.status != b.status || a.failure != b.failure || a.config_yaml != b.config_yaml)
    return "header";
  if (a.config != b.config || a.environment != b.environment || a.summary != b.summary) return "maps";
  if (a.steps.size() != b.steps.size() ||
      std::memcmp(a.steps.data(), b.steps.data(), a.steps.size() * sizeof(sweep::StepMetrics)) != 0)
    return "steps";
  if (a.evals.size() != b.evals.size() ||
      std::memcmp(a.evals.data(), b.evals.data(), a.evals.size() * sizeof(sweep::EvalRow)) != 0)
    return "evals";
  for (auto m : {&Record::step_extra, &Record::eval_extra}) {
    if ((a.*m).size() != (b.*m).size()) return "extra";
    auto y = (b.*m).begin();
    for (auto x = (a.*m).begin(); x != (a.*m).end(); ++x, ++y)
      if (x->first != y->first || !same_bits(x->second, y->second)) return "extra " + x->first;
  }
  if (a.checksums.size() != b.checksums.size()) return "checksums";
  for (size_t i = 0; i < a.checksums.size(); ++i)
    if (a.checksums[i].step != b.checksums[i].step || a.checksums[i].params != b.checksums[i].params ||
        a.checksums[i].tensors != b.checksums[i].tensors)
      return "checksum row";
  if (a.params.size() != b.params.size()) return "params";
  for (size_t i = 0; i < a.params.size(); ++i)
    if (a.params[i].name != b.params[i].name || a.params[i].shape != b.params[i].shape ||
        a.params[i].offset != b.params[i].offset || a.params[i].numel != b.params[i].numel)
      return "param";
  if (a.world_size != b.world_size || a.lineage.kind != b.lineage.kind ||
      a.lineage.parent_run_id != b.lineage.parent_run_id || a.lineage.parent_step != b.lineage.parent_step)
    return "world or lineage";
  for (auto m : {&Record::rank_step_time_s, &Record::rank_grad_norm}) {
    if ((a.*m).size() != (b.*m).size()) return "ranks";
    for (size_t i = 0; i < (a.*m).size(); ++i)
      if (!same_bits((a.*m)[i], (b.*m)[i])) return "rank row";
  }
  if (a.telemetry.size() != b.telemetry.size()) return "telemetry";
  for (size_t i = 0; i < a.telemetry.size(); ++i)
    if (a.telemetry[i].step != b.telemetry[i].step || a.telemetry[i].why != b.telemetry[i].why ||
        !same_bits(a.telemetry[i].tensor_grad_norm, b.telemetry[i].tensor_grad_norm) ||
        a.telemetry[i].routed_tokens != b.telemetry[i].routed_tokens)
      return "telemetry row";
  if (a.moe_layers != b.moe_layers || a.moe_experts != b.moe_experts) return "moe";
  const auto &ma = a.memory, &mb = b.memory;
  if (ma.params != mb.params || ma.grads != mb.grads || ma.optimizer != mb.optimizer || ma.step_peak != mb.step_peak ||
      ma.peak_rss != mb.peak_rss)
    return "memory";
  if (a.digest != b.digest || a.computed_digest != b.computed_digest || a.verified != b.verified) return "digest";
  return "";
}

class Cache : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = fs::temp_directory_path() / ("record_cache_test." + std::to_string(::getpid()));
    fs::remove_all(tmp_);
    fs::create_directories(tmp_ / "state");
    fs::create_directories(tmp_ / "sweep" / "runs");
    if (const char* old = std::getenv("XDG_STATE_HOME")) old_state_ = old, had_state_ = true;
    ::setenv("XDG_STATE_HOME", (tmp_ / "state").c_str(), 1);
  }
  void TearDown() override {
    if (had_state_)
      ::setenv("XDG_STATE_HOME", old_state_.c_str(), 1);
    else
      ::unsetenv("XDG_STATE_HOME");
    fs::remove_all(tmp_);
  }
  /// An identity old enough to be cached.
  static FileIdentity settled_identity() {
    FileIdentity f;
    f.dev = 1, f.ino = 2, f.size = 3, f.mtime_ns = 1000000000, f.ctime_ns = 1000000000;
    return f;
  }
  std::string sweep() const { return (tmp_ / "sweep").string(); }
  fs::path entry(const std::string& id) const { return tmp_ / "sweep" / "record-cache" / id; }
  std::string bytes(const std::string& id) const {
    std::ifstream in(entry(id), std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  void write(const std::string& id, const std::string& b) const {
    std::ofstream(entry(id), std::ios::binary | std::ios::trunc) << b;
  }
  fs::path tmp_;
  std::string old_state_;
  bool had_state_ = false;
};

TEST(SipHash, ReferenceVectors) {
  // The reference vectors of SipHash-2-4 (64-bit output): key 00..0f, messages 00..(n-1).
  unsigned char key[16], msg[15];
  for (int i = 0; i < 16; ++i) key[i] = static_cast<unsigned char>(i);
  for (int i = 0; i < 15; ++i) msg[i] = static_cast<unsigned char>(i);
  EXPECT_EQ(sweep::siphash24(key, msg, 0), 0x726fdb47dd0e0e31ULL);
  EXPECT_EQ(sweep::siphash24(key, msg, 15), 0xa129ca6149be45e5ULL);
}

TEST(RecordEncoding, EveryFieldRoundTripsAndNoTruncationDecodes) {
  const Record r = every_field();
  const std::string bytes = sweep::encode_record(r);
  Record back;
  ASSERT_TRUE(sweep::decode_record(bytes.data(), bytes.size(), &back));
  EXPECT_EQ(difference(r, back), "");
  for (size_t n = 0; n < bytes.size(); ++n) {
    Record cut;
    EXPECT_FALSE(sweep::decode_record(bytes.data(), n, &cut)) << n;
  }
  const std::string longer = bytes + "x";
  EXPECT_FALSE(sweep::decode_record(longer.data(), longer.size(), &back));
  // Without the per-rank rows (what compare reads): those empty, everything else the same.
  Record lean;
  ASSERT_TRUE(sweep::decode_record(bytes.data(), bytes.size(), &lean, false));
  EXPECT_TRUE(lean.rank_step_time_s.empty() && lean.rank_grad_norm.empty());
  Record expected = every_field();
  expected.rank_step_time_s.clear(), expected.rank_grad_norm.clear();
  EXPECT_EQ(difference(lean, expected), "");
  for (size_t n = 0; n < bytes.size(); ++n) {
    Record cut;
    EXPECT_FALSE(sweep::decode_record(bytes.data(), n, &cut, false)) << n;
  }
}

TEST_F(Cache, AnEntryServesOnlyTheFileIdentityItWasMadeFor) {
  const FileIdentity file = settled_identity();
  RecordCache cache(sweep());
  ASSERT_EQ(cache.note(), "");
  cache.put("run1", file, every_field());
  Record r;
  r.path = "kept";
  RecordCache reader(sweep());
  ASSERT_TRUE(reader.get("run1", file, &r));
  EXPECT_EQ(difference(r, every_field()), "");
  EXPECT_EQ(r.path, "kept");
  EXPECT_EQ(reader.hits(), 1u);
  for (int64_t FileIdentity::*f : {&FileIdentity::size, &FileIdentity::mtime_ns, &FileIdentity::ctime_ns}) {
    FileIdentity other = file;
    other.*f += 1;
    EXPECT_FALSE(reader.get("run1", other, &r));
  }
  FileIdentity moved = file;
  moved.ino += 1;
  EXPECT_FALSE(reader.get("run1", moved, &r));
  EXPECT_FALSE(reader.get("run2", file, &r)) << "another run's entry";
  EXPECT_EQ(reader.note(), "") << "a changed record is an ordinary miss";
  // A record that changed within the last 2 s is not entered.
  FileIdentity fresh = file;
  fresh.ctime_ns = int64_t(std::time(nullptr)) * 1000000000;
  cache.put("run3", fresh, every_field());
  EXPECT_FALSE(fs::exists(entry("run3")));
}

TEST_F(Cache, EditedForgedOrOtherKeysEntriesAreRefusedOnceWithOneLine) {
  const FileIdentity file = settled_identity();
  RecordCache(sweep()).put("run1", file, every_field());
  const std::string good = bytes("run1");
  Record r;
  // A byte of the payload changed.
  std::string edited = good;
  edited[edited.size() - 20] ^= 1;
  write("run1", edited);
  RecordCache a(sweep());
  EXPECT_FALSE(a.get("run1", file, &r));
  EXPECT_NE(a.note().find("1 entry damaged, edited or made under another key"), std::string::npos) << a.note();
  EXPECT_FALSE(fs::exists(entry("run1"))) << "a refused entry is removed, so the line is said once";
  // The payload changed and its XXH3-128 recomputed, as a forger without the key would.
  Record other = every_field();
  other.status = "completed";
  other.steps[0].loss = 42;
  const std::string payload = sweep::encode_record(other);
  const size_t header = good.size() - sweep::encode_record(every_field()).size();
  std::string forged = good.substr(0, header) + payload;
  const uint64_t length = payload.size();
  const XXH128_hash_t sum = XXH3_128bits(payload.data(), payload.size());
  std::memcpy(&forged[header - 32], &length, 8);
  std::memcpy(&forged[header - 24], &sum.low64, 8);
  std::memcpy(&forged[header - 16], &sum.high64, 8);
  write("run1", forged);
  RecordCache b(sweep());
  EXPECT_FALSE(b.get("run1", file, &r));
  EXPECT_NE(b.note().find("1 entry"), std::string::npos);
  // The good entry back, read under another user's key.
  write("run1", good);
  ::setenv("XDG_STATE_HOME", (tmp_ / "other").c_str(), 1);
  RecordCache c(sweep());
  EXPECT_FALSE(c.get("run1", file, &r));
  EXPECT_NE(c.note().find("1 entry"), std::string::npos);
  // Truncated, empty, a directory, another version: refused, never a crash.
  for (const std::string& b :
       {good.substr(0, good.size() / 2), std::string(), "sweep-record-cache 9\n" + good.substr(21)}) {
    ::setenv("XDG_STATE_HOME", (tmp_ / "state").c_str(), 1);
    write("run1", b);
    RecordCache d(sweep());
    EXPECT_FALSE(d.get("run1", file, &r));
    EXPECT_NE(d.note().find("1 entry"), std::string::npos) << b.size();
  }
  fs::remove(entry("run1"));
  fs::create_directories(entry("run1"));
  EXPECT_FALSE(RecordCache(sweep()).get("run1", file, &r));
}

TEST_F(Cache, AKeyFileThatIsNotTheUsersOwnTurnsTheCacheOff) {
  const fs::path key = tmp_ / "state" / "sweep" / "key";
  RecordCache(sweep()).put("run1", settled_identity(), every_field());  // makes the key
  ASSERT_TRUE(fs::exists(key));
  EXPECT_EQ(fs::status(key).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  ::chmod(key.c_str(), 0644);
  RecordCache off(sweep());
  Record r;
  EXPECT_FALSE(off.get("run1", settled_identity(), &r));
  EXPECT_NE(off.note().find("not used"), std::string::npos) << off.note();
  EXPECT_NE(off.note().find("mode 0600"), std::string::npos) << off.note();
  ::chmod(key.c_str(), 0600);
  EXPECT_TRUE(RecordCache(sweep()).get("run1", settled_identity(), &r));
  // A link where the cache directory should be is never written through.
  fs::remove_all(tmp_ / "sweep" / "record-cache");
  fs::create_directories(tmp_ / "elsewhere");
  fs::create_directory_symlink(tmp_ / "elsewhere", tmp_ / "sweep" / "record-cache");
  RecordCache(sweep()).put("run1", settled_identity(), every_field());
  EXPECT_TRUE(fs::is_empty(tmp_ / "elsewhere"));
}

}  // namespace
