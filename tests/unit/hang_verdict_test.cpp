// results/analysis/hang_verdict.h: the ranks' rings (and heartbeats) merged, the first
// collective they disagree on named -- a rank missing from it, ranks that entered different
// operations or sizes under one number -- and nothing when they agree; plus the record's
// /hang section, which results/SCHEMA.md documents.
#include "hang_verdict.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>

#include "hdf5_c.h"     // reads /hang back
#include "record.h"     // mark_partial_failed
#include "temp_dir.h"   // TempDirTest
#include "test_util.h"  // read_file

namespace sweep {
namespace {

namespace fs = std::filesystem;

/// One collective of a synthetic run: its operation, bytes and the rank it waits on.
struct Call {
  std::string op;
  long long bytes;
  int peer = -1;
};

/// A run's first collectives of all ranks: allgather (16 B) and allreduce (4096 B) in turn,
/// `n` of them, 2 a step.
std::vector<Call> alternating(int n) {
  std::vector<Call> calls;
  for (int i = 1; i <= n; ++i) calls.push_back(i % 2 ? Call{"allgather", 16} : Call{"allreduce", 4096});
  return calls;
}

/// The ring a rank keeps of `calls`: numbered from 1, the last `keep` of them, the newest
/// still running when `inside`.
std::vector<RingEntry> ring_of(const std::vector<Call>& calls, bool inside, size_t keep = 64) {
  std::vector<RingEntry> all;
  long long group = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (calls[i].peer < 0) ++group;
    const double t = 1000.0 + double(i);
    all.push_back(RingEntry{(long long)i + 1, group, 1 + (long long)i / 2, calls[i].peer, calls[i].bytes, calls[i].op,
                            t, t + 0.5});
  }
  if (inside && !all.empty()) all.back().end_s = -1;
  if (all.size() > keep) all.erase(all.begin(), all.end() - long(keep));
  return all;
}

/// What a rank's heartbeat says after `calls`.
CollectiveBeat beat_after(const std::vector<Call>& calls, bool inside) {
  CollectiveBeat b;
  for (const Call& c : calls) b.group += c.peer < 0 ? 1 : 0;
  b.seq = (long long)calls.size();
  b.step = 1 + (b.seq - 1) / 2;
  b.inside = inside;
  b.peer = calls.empty() ? -1 : calls.back().peer;
  b.op = calls.empty() ? "none" : calls.back().op;
  return b;
}

RankCollectives with_ring(const std::vector<Call>& calls, bool inside, size_t keep = 64) {
  return {ring_of(calls, inside, keep), beat_after(calls, inside)};
}

RankCollectives beat_only(const std::vector<Call>& calls, bool inside) {
  return {std::nullopt, beat_after(calls, inside)};
}

using Kind = CollectiveDisagreement::Kind;

// The acceptance's shape: rank 1 stopped (SIGSTOP) outside any collective leaves no ring,
// only its heartbeat ("finished #39"); ranks 0 and 2 wait in #40.
TEST(HangVerdict, ARankStoppedOutsideAnyCollectiveIsMissingFromTheOneTheOthersWaitIn) {
  const auto waited = alternating(40), stopped = alternating(39);
  const auto d = first_disagreement({with_ring(waited, true), beat_only(stopped, false), with_ring(waited, true)});
  EXPECT_EQ(d.kind, Kind::missing);
  EXPECT_EQ(d.at.seq, 40);
  EXPECT_EQ(d.at.group, 40);
  EXPECT_EQ(d.missing, std::vector<int>{1});
  EXPECT_EQ(d.entered, (std::vector<int>{0, 2}));
  EXPECT_EQ(d.text(), "rank 1 never entered collective #40 (allreduce, 4096 B, at step 20); ranks 0, 2 waited in it");
  // A stuck rank that wrote its ring says the same; so does one of several.
  EXPECT_EQ(first_disagreement({with_ring(waited, true), with_ring(stopped, false), with_ring(waited, true)}).text(),
            d.text());
  EXPECT_EQ(first_disagreement({with_ring(waited, true), beat_only(stopped, false), beat_only(stopped, false)}).text(),
            "ranks 1, 2 never entered collective #40 (allreduce, 4096 B, at step 20); rank 0 waited in it");
}

// What ranks entered after the first rank decided to stop says nothing of the hang: rank 1,
// stopped by hand before #40, is continued by its launcher to be ended and enters #40 and
// #41; rank 0 moves on while rank 2, the first to stop, takes its stack. As of rank 2's
// stop, rank 1 never entered #40 and ranks 0 and 2 waited in it.
TEST(HangVerdict, RingsAreReadAsOfTheFirstRanksStop) {
  std::vector<std::optional<std::vector<RingEntry>>> rings = {
      ring_of(alternating(42), true), ring_of(alternating(41), false), ring_of(alternating(40), true)};
  (*rings[1])[39].start_s = 1039.8, (*rings[1])[40].start_s = 1040.5;  // after its SIGCONT
  const std::vector<double> stopped = {1045.0, 1041.0, 1039.2};
  auto view = [](const std::vector<std::optional<std::vector<RingEntry>>>& rs) {
    std::vector<RankCollectives> out;
    for (const auto& r : rs) out.push_back({r, std::nullopt});
    return first_disagreement(out);
  };
  EXPECT_NE(view(rings).text().rfind("rank 1 never entered collective #40", 0), 0u) << "as the rings were written";
  cut_at_first_stop(rings, stopped);
  EXPECT_EQ(rings[0]->back().seq, 40);
  EXPECT_TRUE(rings[0]->back().inside()) << "it left #40 only after rank 2's stop";
  EXPECT_EQ(rings[1]->back().seq, 39);
  EXPECT_FALSE(rings[1]->back().inside());
  EXPECT_EQ(view(rings).text(),
            "rank 1 never entered collective #40 (allreduce, 4096 B, at step 20); ranks 0, 2 waited in it");
  // Rings of an older writer say no stop time: taken as they are.
  std::vector<std::optional<std::vector<RingEntry>>> old = {ring_of(alternating(42), true)};
  cut_at_first_stop(old, {0.0});
  EXPECT_EQ(old[0]->size(), 42u);
}

TEST(HangVerdict, RanksThatAllEnteredTheSameCollectivesDoNotDisagree) {
  const auto calls = alternating(50);
  for (bool inside : {true, false}) {
    const auto d = first_disagreement({with_ring(calls, inside), with_ring(calls, inside), beat_only(calls, inside)});
    EXPECT_EQ(d.kind, Kind::none);
    EXPECT_EQ(d.text(), "");
    EXPECT_FALSE(hang_forensics(d, {}));
  }
  EXPECT_EQ(first_disagreement({}).kind, Kind::none);
  EXPECT_EQ(first_disagreement({RankCollectives{}, RankCollectives{}}).kind, Kind::none);
}

// A desync: under the same number rank 1 entered another operation, or the same one with
// other bytes; the first such collective is named, not the hang that followed it.
TEST(HangVerdict, RanksThatEnteredAnotherOperationOrSizeUnderOneNumberAreADesync) {
  auto calls = alternating(40), other_op = calls, other_size = calls;
  other_op[36] = Call{"allreduce", 4096};  // #37, an allgather of 16 B on the others
  other_size[36] = Call{"allgather", 24};
  auto d = first_disagreement({with_ring(calls, true), with_ring(other_op, true), with_ring(calls, true)});
  EXPECT_EQ(d.kind, Kind::mismatch);
  EXPECT_EQ(d.at.group, 37);
  EXPECT_EQ(d.text(),
            "collective #37 at step 19 differs between the ranks: ranks 0, 2 entered allgather (16 B), rank 1 "
            "allreduce (4096 B)");
  d = first_disagreement({with_ring(calls, true), with_ring(other_size, true)});
  EXPECT_EQ(d.kind, Kind::mismatch);
  EXPECT_EQ(d.text(),
            "collective #37 at step 19 differs between the ranks: rank 0 entered allgather (16 B), rank 1 allgather "
            "(24 B)");
  // A rank that also never reached the end is named after the desync.
  auto short_op = other_op;
  short_op.resize(39);
  d = first_disagreement({with_ring(calls, true), with_ring(short_op, false), with_ring(calls, true)});
  EXPECT_EQ(d.kind, Kind::mismatch);
  EXPECT_EQ(d.at.group, 37);
}

// Each ring keeps the last 64 collectives: a difference older than one rank's ring reaches
// is judged among the ranks that still hold it, and not at all where only one does.
TEST(HangVerdict, CollectivesOlderThanARingReachesAreJudgedOnlyWhereTheyAreStillHeld) {
  auto calls = alternating(100), early = calls;
  early[9] = Call{"barrier", 0};  // #10, long gone from a ring of 64 at #100
  const auto stopped = std::vector<Call>(calls.begin(), calls.begin() + 99);
  // Rank 1 kept all 100 (a longer ring), rank 0 the last 64: #10 is rank 1's alone, so the
  // verdict is the rank missing from #100.
  auto d = first_disagreement({with_ring(calls, true), with_ring(early, true, 1000), beat_only(stopped, false)});
  EXPECT_EQ(d.kind, Kind::missing) << d.text();
  EXPECT_EQ(d.at.group, 100);
  EXPECT_EQ(d.missing, std::vector<int>{2});
  // Where two rings still hold the difference it is a desync, though a third has lost it
  // (rank 0's ring reaches back 30 collectives only, to #71).
  early = calls;
  early[59] = Call{"barrier", 0};  // #60
  d = first_disagreement({with_ring(calls, true, 30), with_ring(early, true), with_ring(calls, true)});
  EXPECT_EQ(d.kind, Kind::mismatch) << d.text();
  EXPECT_EQ(d.at.group, 60);
  EXPECT_EQ(d.entered, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(d.text(),
            "collective #60 at step 30 differs between the ranks: rank 1 entered barrier (0 B), rank 2 allreduce "
            "(4096 B)");
}

// Point-to-point exchanges differ in count between ranks, so they are not matched by
// number: a rank waiting on a peer is followed to the rank that waits in nothing.
TEST(HangVerdict, ARankTheOthersWaitOnInAnExchangeIsMissingFromIt) {
  auto head = alternating(20);
  auto rank0 = head, rank2 = head;
  rank0.push_back(Call{"the gradient exchange (sendrecv)", 64, 2});  // #21, done
  rank0.push_back(Call{"the gradient exchange (sendrecv)", 64, 1});  // #22, waits on rank 1
  rank2.push_back(Call{"the gradient exchange (sendrecv)", 64, 1});  // #21, waits on rank 1
  auto r0 = with_ring(rank0, true), r2 = with_ring(rank2, true);
  const auto d = first_disagreement({r0, beat_only(head, false), r2});
  EXPECT_EQ(d.kind, Kind::missing);
  EXPECT_EQ(d.missing, std::vector<int>{1});
  EXPECT_EQ(d.entered, (std::vector<int>{0, 2}));
  EXPECT_EQ(d.text(),
            "rank 1 never entered collective #22 (the gradient exchange (sendrecv), 64 B, at step 11); ranks 0, 2 "
            "waited in it (#21 on rank 2)");
  // Through a chain: rank 0 waits on 2, which waits on 1.
  rank0.back().peer = 2;
  EXPECT_EQ(first_disagreement({with_ring(rank0, true), beat_only(head, false), r2}).missing, std::vector<int>{1});
  // A cycle of waits names no one.
  auto rank1 = head;
  rank1.push_back(Call{"the gradient exchange (sendrecv)", 64, 0});
  EXPECT_EQ(first_disagreement({with_ring(rank0, true), with_ring(rank1, true), with_ring(rank2, true)}).kind,
            Kind::none);
}

TEST(HangVerdict, ARankThatLeftNothingIsSaidToHaveLeftNothing) {
  const auto waited = alternating(12), stopped = alternating(11);
  const auto d = first_disagreement({with_ring(waited, true), beat_only(stopped, false), RankCollectives{}});
  EXPECT_EQ(d.silent, std::vector<int>{2});
  EXPECT_EQ(d.text(),
            "rank 1 never entered collective #12 (allreduce, 4096 B, at step 6); rank 0 waited in it; nothing recorded "
            "of rank 2's collectives");
}

class HangRecordTest : public sweep_test::TempDirTest {
 protected:
  HangRecordTest() : TempDirTest("sweep_hang_record") {}
};

/// The dataset names of results/SCHEMA.md's /hang section.
std::set<std::string> documented_hang_datasets() {
  const std::string schema = sweep_test::read_file(fs::path(SWEEP_SOURCE_DIR) / "results/SCHEMA.md");
  const size_t at = schema.find("\n## `/hang`");
  const std::string section = schema.substr(at, schema.find("\n## ", at + 1) - at);
  std::set<std::string> names;
  const std::regex row("\n\\| `(\\w+)` \\|");
  for (std::sregex_iterator it(section.begin(), section.end(), row), end; it != end; ++it) names.insert((*it)[1]);
  return names;
}

std::string str_attr(hid_t obj, const char* name) {
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT), t = H5Aget_type(a);
  char* p = nullptr;
  std::string s = H5Aread(a, t, &p) >= 0 && p ? p : "<unread>";
  if (p) H5free_memory(p);
  H5Tclose(t), H5Aclose(a);
  return s;
}

std::vector<int64_t> i64s(hid_t g, const char* name) {
  hid_t d = H5Dopen2(g, name, H5P_DEFAULT), s = H5Dget_space(d);
  std::vector<int64_t> v(size_t(H5Sget_simple_extent_npoints(s)));
  if (!v.empty()) H5Dread(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
  H5Sclose(s), H5Dclose(d);
  return v;
}

// The driver's post-mortem writes the verdict and the merged rings into the failed partial
// record's /hang, every dataset SCHEMA.md documents there, one row per ring entry.
TEST_F(HangRecordTest, ThePartialRecordOfAHangKeepsTheVerdictAndTheRings) {
  const std::string path = (dir_ / "record.h5").string();
  {
    RecordHeader h;
    h.run_id = "0123456789abcdef";
    h.config_yaml = "train:\n  steps: 3\n";
    RecordWriter w(path, h);
  }  // killed: the partial says running
  const auto waited = alternating(40), stopped = alternating(39);
  const std::vector<RankCollectives> ranks = {with_ring(waited, true), beat_only(stopped, false),
                                              with_ring(waited, true, 10)};
  const auto forensics = hang_forensics(first_disagreement(ranks), ranks);
  ASSERT_TRUE(forensics);
  ASSERT_TRUE(mark_partial_failed(path, "rank 0: no progress", &*forensics));
  ASSERT_TRUE(mark_partial_failed(path, "rank 0: no progress", &*forensics)) << "a second look replaces the first";
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  hid_t f = H5Fopen((path + ".partial").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  hid_t g = H5Gopen2(f, "hang", H5P_DEFAULT);
  ASSERT_GE(g, 0);
  EXPECT_EQ(str_attr(g, "verdict"), forensics->verdict);
  EXPECT_EQ(str_attr(g, "kind"), "missing");
  EXPECT_EQ(i64s(g, "missing"), std::vector<int64_t>{1});
  EXPECT_EQ(i64s(g, "entered"), (std::vector<int64_t>{0, 2}));
  const auto rank = i64s(g, "ring_rank"), seq = i64s(g, "ring_seq");
  ASSERT_EQ(rank.size(), 40u + 10u);  // rank 0's whole ring, rank 2's last 10; rank 1 wrote none
  EXPECT_EQ(rank.front(), 0);
  EXPECT_EQ(rank.back(), 2);
  EXPECT_EQ(seq.front(), 1);
  EXPECT_EQ(seq.back(), 40);
  const std::set<std::string> documented = documented_hang_datasets();
  EXPECT_GE(documented.size(), 10u) << "the parser found SCHEMA.md's /hang table";
  for (const std::string& name : documented) {
    EXPECT_GT(H5Lexists(g, name.c_str(), H5P_DEFAULT), 0) << "SCHEMA.md documents /hang/" << name;
    if (H5Lexists(g, name.c_str(), H5P_DEFAULT) > 0) {
      hid_t d = H5Dopen2(g, name.c_str(), H5P_DEFAULT), s = H5Dget_space(d);
      const auto n = H5Sget_simple_extent_npoints(s);
      if (name.rfind("ring_", 0) == 0) EXPECT_EQ(n, 50) << name;
      H5Sclose(s), H5Dclose(d);
    }
  }
  for (const char* a : {"verdict", "kind", "collective", "group"}) EXPECT_GT(H5Aexists(g, a), 0) << a;
  H5Gclose(g), H5Fclose(f);
  EXPECT_EQ(read_record_status(path).failure, "rank 0: no progress");
}

}  // namespace
}  // namespace sweep
