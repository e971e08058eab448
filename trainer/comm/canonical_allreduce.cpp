#include "canonical_allreduce.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>

#include "vector_clones.h"  // SWEEP_VECTOR_CLONES

namespace sweep {

namespace {

// The all-to-all and the tree go chunk by chunk: chunk c of every shard is exchanged, then
// summed while it is still in cache, and the workspace holds W chunks, not W shards.
// 1 MiB per piece: large enough that the extra messages cost little, small enough that a
// chunk's pieces stay in a core's cache. The chunking changes no sum (the tree is
// elementwise), only the order in which elements are done.
constexpr size_t kChunk = (size_t(1) << 20) / sizeof(float);
// The workspace of one exchange round, W pieces of up to this many bytes together: on a
// link with 24 ms per message (TCP between test nodes) an exchange per 1 MiB chunk cost
// the 16 MiB reduction 1.7x the native all-reduce's time.
constexpr size_t kExchangeBytes = size_t(16) << 20;

void check_layout(const Communicator& comm, const ShardLayout& layout, size_t n, const char* what) {
  if (layout.world() != comm.size() || layout.n != n || layout.offsets.front() != 0 || layout.offsets.back() != n)
    throw std::invalid_argument(std::string(what) + " on rank " + std::to_string(comm.rank()) + ": layout for " +
                                std::to_string(layout.n) + " elements over " + std::to_string(layout.world()) +
                                " shards does not fit " + std::to_string(n) + " elements over " +
                                std::to_string(comm.size()) + " ranks");
}

// Ring all-gather, in place: block s of `buf` is [offsets[s], offsets[s+1]) bytes and
// is valid on rank s on entry, everywhere on return. At step t a rank forwards the block
// it received at step t-1 to its right neighbour: W-1 steps, each moving one block.
void ring_allgatherv(Communicator& comm, char* buf, const std::vector<size_t>& offsets) {
  const int w = comm.size(), r = comm.rank();
  const int right = (r + 1) % w, left = (r + w - 1) % w;
  auto size = [&](int s) { return offsets[size_t(s) + 1] - offsets[size_t(s)]; };
  for (int t = 0; t + 1 < w; ++t) {
    int send = (r - t + w) % w, recv = (r - t - 1 + 2 * w) % w;
    comm.sendrecv(buf + offsets[size_t(send)], size(send), right, buf + offsets[size_t(recv)], size(recv), left);
  }
}

}  // namespace

ShardLayout shard_layout(size_t n, int world, size_t align) {
  if (world < 1) throw std::invalid_argument("shard_layout: world size " + std::to_string(world) + " < 1");
  if (align == 0) throw std::invalid_argument("shard_layout: align must be > 0");
  ShardLayout layout;
  layout.n = n;
  layout.align = align;
  const size_t blocks = (n + align - 1) / align;
  const size_t base = blocks / size_t(world), extra = blocks % size_t(world);
  layout.offsets.assign(size_t(world) + 1, 0);
  size_t taken = 0;
  for (size_t s = 0; s < size_t(world); ++s) {
    taken += base + (s < extra ? 1 : 0);
    layout.offsets[s + 1] = std::min(n, taken * align);
  }
  return layout;
}

void canonical_allreduce(Communicator& comm, const float* partial, float* out, size_t n, const ShardLayout& layout,
                         bool gather, std::vector<float>* workspace) {
  // Rank s's partial is one subtree: leaf s of a tree over the W ranks.
  std::vector<std::vector<TreeNode>> nodes(static_cast<size_t>(comm.size()));
  for (size_t s = 0; s < nodes.size(); ++s) nodes[s] = {TreeNode{int64_t(s), 1}};
  canonical_allreduce(comm, std::vector<const float*>{partial}, nodes, comm.size(), out, n, layout, gather, workspace);
}

void canonical_allreduce(Communicator& comm, const std::vector<const float*>& partials,
                         const std::vector<std::vector<TreeNode>>& nodes, int64_t leaves, float* out, size_t n,
                         const ShardLayout& layout, bool gather, std::vector<float>* workspace) {
  check_layout(comm, layout, n, "canonical_allreduce");
  const int w = comm.size(), r = comm.rank();
  if (nodes.size() != size_t(w) || partials.size() != nodes[size_t(r)].size() || partials.empty())
    throw std::invalid_argument("canonical_allreduce on rank " + std::to_string(r) + ": " +
                                std::to_string(partials.size()) + " partial sums for " +
                                std::to_string(nodes.size() == size_t(w) ? nodes[size_t(r)].size() : 0) +
                                " subtrees of " + std::to_string(nodes.size()) + " ranks");
  // Node i of all ranks in order: rank s's j-th is first[s] + j.
  std::vector<TreeNode> all;
  std::vector<size_t> first;
  for (const auto& mine : nodes) first.push_back(all.size()), all.insert(all.end(), mine.begin(), mine.end());
  const size_t total = all.size(), own = first[size_t(r)], k = partials.size();
  // The tree takes the nodes in leaf order; ranks hold them in rank order, which is leaf
  // order but where a rank computes another rank's shares (dist.diagnose_rotate).
  std::vector<size_t> order(total);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return all[a].lo < all[b].lo; });
  std::vector<TreeNode> sorted(total);
  for (size_t i = 0; i < total; ++i) sorted[i] = all[order[i]];
  std::vector<float> local;
  std::vector<float>& ws = workspace ? *workspace : local;
  if (w == 1 && k == 1) {
    if (out != partials[0] && n) std::memmove(out, partials[0], n * sizeof(float));
    return;
  }
  if (w == 1) {  // the tree over this rank's own subtrees; `out` is the first one's scratch
    if (ws.size() < k * n) ws.resize(k * n);
    std::vector<float*> slot(k);
    for (size_t j = 0; j < k; ++j) slot[j] = j == 0 ? out : ws.data() + j * n;
    tree_over_nodes(all, partials.data(), slot.data(), n, leaves, out);
    return;
  }
  const size_t chunk = std::max<size_t>(1, std::min(kChunk, layout.size(0)));  // shard 0 is the largest
  // Chunks exchanged at once: a link with a high latency (TCP between hosts) pays it per
  // exchange, so several chunks go together, within kExchangeBytes of workspace.
  const size_t group = std::max<size_t>(1, kExchangeBytes / (total * chunk * sizeof(float)));
  const size_t span = chunk * group;
  const size_t rounds = std::max<size_t>(1, (layout.size(0) + span - 1) / span);
  if (ws.size() < total * span) ws.resize(total * span);
  // Round c's piece of shard s: `len(s, c)` elements from `at(s, c)` (0 elements, at the
  // shard's end, once the shard is used up). Every rank computes the same.
  auto at = [&](int s, size_t c) { return layout.begin(s) + std::min(c * span, layout.size(s)); };
  auto len = [&](int s, size_t c) { return std::min(span, layout.end(s) - at(s, c)); };
  std::vector<const float*> piece(total), leaf_piece(total);
  std::vector<float*> slot(total), leaf_slot(total);
  for (size_t c = 0; c < rounds; ++c) {
    // All-to-all of round c, pairwise: at step t send round c's piece of shard r+t of each
    // of our partials to its owner and take round c's pieces of shard r of rank r-t's
    // partials into their slots (one message per subtree; a rank with fewer subtrees
    // sends or receives nothing in the calls past its count). Our own pieces are read
    // where they lie. The tree writes only shard r of `out`, which is never sent.
    for (int t = 1; t < w; ++t) {
      const int dst = (r + t) % w, src = (r - t + w) % w;
      const size_t theirs = nodes[size_t(src)].size();
      for (size_t j = 0; j < std::max(k, theirs); ++j)
        comm.sendrecv(j < k ? partials[j] + at(dst, c) : nullptr, j < k ? len(dst, c) * sizeof(float) : 0, dst,
                      j < theirs ? ws.data() + (first[size_t(src)] + j) * span : nullptr,
                      j < theirs ? len(r, c) * sizeof(float) : 0, src);
    }
    // Then the tree, chunk by chunk, each while its pieces are in cache.
    for (size_t o = 0; o < len(r, c); o += chunk) {
      const size_t l = std::min(chunk, len(r, c) - o);
      for (size_t i = 0; i < total; ++i) {
        slot[i] = ws.data() + i * span + o;
        piece[i] = i >= own && i < own + k ? partials[i - own] + at(r, c) + o : slot[i];
      }
      for (size_t i = 0; i < total; ++i) leaf_piece[i] = piece[order[i]], leaf_slot[i] = slot[order[i]];
      tree_over_nodes(sorted, leaf_piece.data(), leaf_slot.data(), l, leaves, out + at(r, c) + o);
    }
  }
  if (gather) allgather_shards(comm, out, layout);
}

void allgather_shards(Communicator& comm, float* data, const ShardLayout& layout) {
  check_layout(comm, layout, layout.n, "allgather_shards");
  std::vector<size_t> bytes(layout.offsets.size());
  for (size_t s = 0; s < bytes.size(); ++s) bytes[s] = layout.offsets[s] * sizeof(float);
  ring_allgatherv(comm, reinterpret_cast<char*>(data), bytes);
}

double sharded_sum_of_squares(Communicator& comm, const float* g, const ShardLayout& layout) {
  return shard_sum_of_squares(comm, g + layout.begin(comm.rank()), layout);
}

double shard_sum_of_squares(Communicator& comm, const float* shard, const ShardLayout& layout) {
  check_layout(comm, layout, layout.n, "sharded_sum_of_squares");
  if (layout.align % kNormBlock != 0)
    throw std::invalid_argument("sharded_sum_of_squares on rank " + std::to_string(comm.rank()) + ": shard align " +
                                std::to_string(layout.align) + " is not a multiple of kNormBlock " +
                                std::to_string(kNormBlock));
  const size_t n = layout.n;
  const size_t blocks = (n + kNormBlock - 1) / kNormBlock;
  // Shard s owns blocks [first[s], first[s+1]): boundaries are block multiples, or n.
  std::vector<size_t> first(layout.offsets.size());
  for (size_t s = 0; s < first.size(); ++s) first[s] = (layout.offsets[s] + kNormBlock - 1) / kNormBlock;

  std::vector<double> partials(blocks);
  const int r = comm.rank();
  for (size_t b = first[size_t(r)]; b < first[size_t(r) + 1]; ++b) {
    size_t lo = b * kNormBlock;
    // One block through sum_of_squares is 0 + block = block: the very partial it adds.
    partials[b] = sum_of_squares(shard + (lo - layout.begin(r)), std::min(kNormBlock, n - lo));
  }
  std::vector<size_t> bytes(first.size());
  for (size_t s = 0; s < bytes.size(); ++s) bytes[s] = first[s] * sizeof(double);
  ring_allgatherv(comm, reinterpret_cast<char*>(partials.data()), bytes);

  double total = 0;
  for (double p : partials) total += p;  // block order, as sum_of_squares does
  return total;
}

std::vector<double> slice_sums_of_squares(Communicator& comm, const float* g, size_t begin, size_t size,
                                          const std::vector<Slice>& slices, bool sharded) {
  // A rank sums the pieces it holds and leaves +0 for the others, so adding the gathered
  // rows gives every piece exactly (x + 0 = x) whichever rank held it.
  std::vector<size_t> first(slices.size() + 1, 0);
  std::vector<double> pieces;
  for (size_t t = 0; t < slices.size(); ++t) {
    first[t] = pieces.size();
    const size_t lo = slices[t].offset, hi = lo + slices[t].size;
    for (size_t a = lo; a < hi;) {
      const size_t b = std::min(hi, (a / kNormBlock + 1) * kNormBlock);
      if (a >= begin && b <= begin + size) {
        pieces.push_back(lane_dot<double>(g + (a - begin), g + (a - begin), b - a));
      } else if (!sharded || (a < begin + size && b > begin)) {
        throw std::invalid_argument("slice_sums_of_squares: elements [" + std::to_string(a) + ", " + std::to_string(b) +
                                    ") are " + (sharded ? "cut by a shard boundary" : "not held"));
      } else {
        pieces.push_back(0);
      }
      a = b;
    }
  }
  first[slices.size()] = pieces.size();
  if (sharded && comm.size() > 1) {
    std::vector<double> all(pieces.size() * size_t(comm.size()));
    comm.allgather(pieces.data(), pieces.size() * sizeof(double), all.data());
    for (size_t k = 0; k < pieces.size(); ++k) {
      double v = all[k];
      for (size_t r = 1; r < size_t(comm.size()); ++r) v += all[r * pieces.size() + k];
      pieces[k] = v;
    }
  }
  std::vector<double> sums(slices.size());
  for (size_t t = 0; t < slices.size(); ++t) sums[t] = sum_in_order(pieces.data() + first[t], first[t + 1] - first[t]);
  return sums;
}

}  // namespace sweep
