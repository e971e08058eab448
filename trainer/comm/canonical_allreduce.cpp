#include "canonical_allreduce.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace sweep {

namespace {

void check_layout(const Communicator& comm, const ShardLayout& layout, size_t n, const char* what) {
  if (layout.world() != comm.size() || layout.n != n || layout.offsets.front() != 0 || layout.offsets.back() != n)
    throw std::invalid_argument(std::string(what) + " on rank " + std::to_string(comm.rank()) + ": layout for " +
                                std::to_string(layout.n) + " elements over " + std::to_string(layout.world()) +
                                " shards does not fit " + std::to_string(n) + " elements over " +
                                std::to_string(comm.size()) + " ranks");
}

// Canonical tree over the W equal-length pieces ws[r*len ..]: tree(lo,hi) lands in `dst`,
// every inner subtree in place in its leftmost piece. Same shape and operand order as
// TreeAccumulator (left + right), so the same bits.
void tree_into(float* ws, size_t len, int lo, int hi, float* dst) {
  float* left = ws + size_t(lo) * len;
  if (hi - lo == 1) {
    if (dst != left && len) std::memcpy(dst, left, len * sizeof(float));
    return;
  }
  int p = 1;
  while (p * 2 < hi - lo) p *= 2;
  tree_into(ws, len, lo, lo + p, left);
  float* right = ws + size_t(lo + p) * len;
  tree_into(ws, len, lo + p, hi, right);
  for (size_t i = 0; i < len; ++i) dst[i] = left[i] + right[i];
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
  check_layout(comm, layout, n, "canonical_allreduce");
  const int w = comm.size(), r = comm.rank();
  if (w == 1) {
    if (out != partial && n) std::memmove(out, partial, n * sizeof(float));
    return;
  }
  std::vector<float> local;
  std::vector<float>& ws = workspace ? *workspace : local;
  const size_t len = layout.size(r);
  if (ws.size() < size_t(w) * len) ws.resize(size_t(w) * len);

  // All-to-all, pairwise: at step t send shard r+t of our partial to its owner and take
  // shard r of rank r-t's partial into slot r-t (step 0 is the local copy). Nothing is
  // written to `out` before every piece of `partial` has been sent, so out == partial works.
  for (int t = 0; t < w; ++t) {
    int dst = (r + t) % w, src = (r - t + w) % w;
    comm.sendrecv(partial + layout.begin(dst), layout.size(dst) * sizeof(float), dst, ws.data() + size_t(src) * len,
                  len * sizeof(float), src);
  }
  tree_into(ws.data(), len, 0, w, out + layout.begin(r));
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

}  // namespace sweep
