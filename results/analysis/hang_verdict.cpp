#include "hang_verdict.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "text.h"  // join

namespace sweep {
namespace {

/// "rank 1" or "ranks 0, 2, 3".
std::string ranks_text(const std::vector<int>& ranks) {
  std::vector<std::string> items;
  items.reserve(ranks.size());
  for (int r : ranks) items.push_back(std::to_string(r));
  return (ranks.size() == 1 ? "rank " : "ranks ") + join(items);
}

std::string bytes_text(long long bytes) { return bytes < 0 ? "" : std::to_string(bytes) + " B"; }

/// What one rank says of the collectives of all ranks.
struct RankView {
  bool silent = true;             // neither a ring nor a heartbeat
  long long top = 0;              // collectives of all ranks it entered
  long long oldest = 1;           // the first of them it still has the entry of
  std::vector<RingEntry> of_all;  // those entries, by group
  std::optional<RingEntry> last;  // where it was when it stopped (its newest entry)
};

RankView view_of(const RankCollectives& rc) {
  RankView v;
  if (rc.ring && !rc.ring->empty()) {
    const std::vector<RingEntry>& ring = *rc.ring;
    v.silent = false;
    for (const RingEntry& e : ring) {
      v.top = std::max(v.top, e.group);
      if (e.of_all_ranks()) v.of_all.push_back(e);
    }
    // A ring that still holds the rank's first collective knows all of them; else it knows
    // those from its oldest entry on (the ring is contiguous).
    v.oldest = ring.front().seq == 1 ? 1 : (v.of_all.empty() ? v.top + 1 : v.of_all.front().group);
    v.last = ring.back();
  }
  if (rc.beat && (v.silent || rc.beat->group > v.top)) {
    // Only the heartbeat (a rank stopped or killed outright writes no ring): its place, and
    // the collective it is in when that is one of all ranks.
    const CollectiveBeat& b = *rc.beat;
    v.silent = false;
    v.top = b.group;
    v.of_all.clear();
    RingEntry e;
    e.seq = b.seq, e.group = b.group, e.step = b.step, e.peer = b.peer, e.bytes = -1, e.op = b.op;
    e.end_s = b.inside ? -1 : 0;
    v.last = e;
    if (b.inside && b.peer < 0) v.of_all.push_back(e);
    v.oldest = v.of_all.empty() ? v.top + 1 : v.top;
  }
  return v;
}

const RingEntry* entry_of(const RankView& v, long long group) {
  for (const RingEntry& e : v.of_all)
    if (e.group == group) return &e;
  return nullptr;
}

/// The collectives of all ranks, oldest first, to the first where the ranks disagree.
CollectiveDisagreement among_all_ranks(const std::vector<RankView>& views) {
  CollectiveDisagreement d;
  long long lo = std::numeric_limits<long long>::max(), hi = 0, min_top = lo;
  for (const RankView& v : views)
    if (!v.silent) lo = std::min(lo, v.oldest), min_top = std::min(min_top, v.top), hi = std::max(hi, v.top);
  if (hi == 0) return d;  // no rank entered a collective of all ranks, or none said anything
  lo = std::max(1LL, std::min(lo, min_top + 1));
  for (long long g = lo; g <= hi; ++g) {
    std::vector<int> entered, missing, waiting;
    std::vector<const RingEntry*> seen;  // by `entered`; null: entered, its entry gone
    for (int r = 0; r < int(views.size()); ++r) {
      const RankView& v = views[size_t(r)];
      if (v.silent) continue;
      if (g > v.top) {
        missing.push_back(r);
        continue;
      }
      const RingEntry* e = g < v.oldest ? nullptr : entry_of(v, g);
      entered.push_back(r);
      seen.push_back(e);
      if (e && e->inside()) waiting.push_back(r);
    }
    // Ranks that entered collective g entered the same call: another operation or size on
    // one of them is a desync (a heartbeat does not know the size).
    std::set<std::string> ops;
    std::set<long long> sizes;
    const RingEntry* first = nullptr;
    for (const RingEntry* e : seen)
      if (e) {
        ops.insert(e->op);
        if (e->bytes >= 0) sizes.insert(e->bytes);
        if (!first) first = e;
      }
    const bool mismatch = ops.size() > 1 || sizes.size() > 1;
    if (!mismatch && (missing.empty() || entered.empty())) continue;
    d.kind = mismatch ? CollectiveDisagreement::Kind::mismatch : CollectiveDisagreement::Kind::missing;
    if (first) d.at = *first;
    if (d.at.bytes < 0 && sizes.size() == 1) d.at.bytes = *sizes.begin();  // a heartbeat's, sized by a ring
    d.at.group = g;
    d.entered = entered, d.missing = missing, d.waiting = waiting;
    for (const RingEntry* e : seen) d.seen.push_back(e ? *e : RingEntry{0, g, 0, -1, -1, "", 0, -1});
    return d;
  }
  return d;
}

/// A rank waiting in a point-to-point exchange, followed along the peers it waits on to a
/// rank that waits in nothing: that one never entered the exchange.
CollectiveDisagreement point_to_point(const std::vector<RankView>& views) {
  CollectiveDisagreement d;
  const int world = int(views.size());
  auto waits_on = [&](int r) {
    const RankView& v = views[size_t(r)];
    return !v.silent && v.last && v.last->inside() && v.last->peer >= 0 && v.last->peer != r ? v.last->peer : -1;
  };
  std::set<int> waiting, missing, silent;
  for (int r = 0; r < world; ++r) {
    int p = waits_on(r);
    if (p < 0) continue;
    std::set<int> seen{r};
    while (p < world && waits_on(p) >= 0 && seen.insert(p).second) p = waits_on(p);
    if (p >= world || seen.count(p)) continue;  // out of range, or a cycle of waits
    if (views[size_t(p)].silent)
      silent.insert(p), waiting.insert(r);
    else if (!views[size_t(p)].last || !views[size_t(p)].last->inside())
      missing.insert(p), waiting.insert(r);
  }
  if (waiting.empty() || missing.empty()) return d;
  d.kind = CollectiveDisagreement::Kind::missing;
  d.at = *views[size_t(*waiting.begin())].last;
  d.entered.assign(waiting.begin(), waiting.end());
  d.waiting = d.entered;
  d.missing.assign(missing.begin(), missing.end());
  for (int r : d.entered) d.seen.push_back(*views[size_t(r)].last);
  return d;
}

}  // namespace

std::string CollectiveDisagreement::text() const {
  if (kind == Kind::none) return "";
  const std::string step = " at step " + std::to_string(at.step);
  std::string out;
  if (kind == Kind::mismatch) {
    // The ranks grouped by what they entered, in rank order of the first of each.
    std::vector<std::pair<std::string, std::vector<int>>> variants;
    for (size_t i = 0; i < entered.size(); ++i) {
      if (seen[i].op.empty()) continue;  // its entry is gone
      const std::string what = seen[i].op + (seen[i].bytes < 0 ? "" : " (" + bytes_text(seen[i].bytes) + ")");
      auto it = std::find_if(variants.begin(), variants.end(), [&](const auto& v) { return v.first == what; });
      if (it == variants.end()) variants.push_back({what, {}}), it = variants.end() - 1;
      it->second.push_back(entered[i]);
    }
    out = "collective #" + std::to_string(at.seq) + step + " differs between the ranks: ";
    for (size_t i = 0; i < variants.size(); ++i)
      out += (i ? ", " : "") + ranks_text(variants[i].second) + (i ? " " : " entered ") + variants[i].first;
    if (!missing.empty()) out += "; " + ranks_text(missing) + " never entered it";
  } else {
    const std::string size = at.bytes < 0 ? "" : ", " + bytes_text(at.bytes);
    out = ranks_text(missing) + " never entered collective #" + std::to_string(at.seq) + " (" + at.op + size + "," +
          step + "); " + ranks_text(entered) + (waiting.size() == entered.size() ? " waited in it" : " entered it");
    // A rank's own numbers also count its point-to-point exchanges, which can differ.
    std::vector<std::string> other;
    for (size_t i = 0; i < entered.size() && i < seen.size(); ++i)
      if (seen[i].seq > 0 && seen[i].seq != at.seq)
        other.push_back("#" + std::to_string(seen[i].seq) + " on rank " + std::to_string(entered[i]));
    if (!other.empty()) out += " (" + join(other) + ")";
  }
  if (!silent.empty()) out += "; nothing recorded of " + ranks_text(silent) + "'s collectives";
  return out;
}

CollectiveDisagreement first_disagreement(const std::vector<RankCollectives>& ranks) {
  std::vector<RankView> views;
  views.reserve(ranks.size());
  for (const RankCollectives& rc : ranks) views.push_back(view_of(rc));
  CollectiveDisagreement d = among_all_ranks(views);
  if (d.kind == CollectiveDisagreement::Kind::none) d = point_to_point(views);
  if (d.kind != CollectiveDisagreement::Kind::none)
    for (int r = 0; r < int(views.size()); ++r)
      if (views[size_t(r)].silent) d.silent.push_back(r);
  return d;
}

std::optional<HangForensics> hang_forensics(const CollectiveDisagreement& d,
                                            const std::vector<RankCollectives>& ranks) {
  if (d.kind == CollectiveDisagreement::Kind::none) return std::nullopt;
  HangForensics h;
  h.verdict = d.text();
  h.kind = d.kind == CollectiveDisagreement::Kind::missing ? "missing" : "mismatch";
  h.collective = d.at.seq;
  h.group = d.at.group;
  h.entered = d.entered;
  h.missing = d.missing;
  for (int r = 0; r < int(ranks.size()); ++r)
    if (ranks[size_t(r)].ring)
      for (const RingEntry& e : *ranks[size_t(r)].ring) h.ring_rank.push_back(r), h.rings.push_back(e);
  return h;
}

void cut_at_first_stop(std::vector<std::optional<std::vector<RingEntry>>>& rings, const std::vector<double>& stopped) {
  double first = INFINITY;
  for (size_t r = 0; r < rings.size() && r < stopped.size(); ++r)
    if (rings[r] && stopped[r] > 0) first = std::min(first, stopped[r]);
  if (!std::isfinite(first)) return;
  for (auto& ring : rings) {
    if (!ring) continue;
    ring->erase(std::remove_if(ring->begin(), ring->end(), [&](const RingEntry& e) { return e.start_s > first; }),
                ring->end());
    for (RingEntry& e : *ring)
      if (e.end_s > first) e.end_s = -1;
  }
}

std::vector<RankCollectives> read_rank_collectives(const std::string& dir, long long since) {
  const int world = std::max(heartbeat_ranks(dir), collective_ring_ranks(dir));
  std::vector<double> stopped;
  auto rings = read_collective_rings(dir, world, since, &stopped);
  cut_at_first_stop(rings, stopped);
  const auto beats = read_heartbeats(dir, world, since);
  std::vector<RankCollectives> out(static_cast<size_t>(world));
  for (size_t r = 0; r < out.size(); ++r) out[r] = {rings[r], beats[r]};
  return out;
}

}  // namespace sweep
