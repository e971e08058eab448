#include "comm_selftest.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "canonical_allreduce.h"
#include "text.h"  // significant

namespace sweep {

CommBandwidth allreduce_bandwidth(size_t bytes, double seconds, int world) {
  CommBandwidth b;
  b.seconds = seconds;
  if (seconds <= 0) return b;
  b.algbw_GBps = double(bytes) / seconds / 1e9;
  b.busbw_GBps = world > 1 ? b.algbw_GBps * 2.0 * double(world - 1) / double(world) : 0.0;
  return b;
}

namespace {

template <class F>
double median_seconds(Communicator& comm, int iters, F&& call) {
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    comm.barrier();
    auto t0 = std::chrono::steady_clock::now();
    call();
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    comm.allreduce_max_double(&dt, 1);  // the slowest rank's time is the collective's time
    t.push_back(dt);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::string fmt(double x) { return significant(x, 6); }

}  // namespace

std::vector<std::string> rank_hosts(Communicator& comm) {
  constexpr size_t kName = 64;
  char mine[kName] = {0};
  ::gethostname(mine, kName - 1);
  std::vector<char> all(kName * size_t(comm.size()));
  comm.allgather(mine, kName, all.data());
  std::vector<std::string> hosts;
  hosts.reserve(size_t(comm.size()));
  for (int r = 0; r < comm.size(); ++r)
    hosts.emplace_back(all.data() + kName * size_t(r), strnlen(all.data() + kName * size_t(r), kName));
  return hosts;
}

int first_remote_rank(const std::vector<std::string>& hosts) {
  for (size_t r = 1; r < hosts.size(); ++r)
    if (hosts[r] != hosts[0]) return int(r);
  return -1;
}

std::vector<std::pair<std::string, std::string>> comm_self_test(Communicator& comm, size_t n, int iters,
                                                                const std::vector<std::string>& hosts) {
  // Both in place on the same buffer, as the trainer calls them (the values only grow
  // by a factor of the world size per call; the timing does not depend on them).
  std::vector<float> buf(n, 1.0f);
  std::vector<float> ws;
  const ShardLayout layout = shard_layout(n, comm.size());
  double native = median_seconds(comm, iters, [&] { comm.allreduce_sum_native(buf.data(), n); });
  std::fill(buf.begin(), buf.end(), 1.0f);
  double canonical =
      median_seconds(comm, iters, [&] { canonical_allreduce(comm, buf.data(), buf.data(), n, layout, true, &ws); });
  std::vector<std::pair<std::string, std::string>> kv;
  kv.emplace_back("comm.bytes", std::to_string(n * sizeof(float)));
  for (auto [name, secs] : {std::pair<const char*, double>{"native", native}, {"canonical", canonical}}) {
    CommBandwidth b = allreduce_bandwidth(n * sizeof(float), secs, comm.size());
    kv.emplace_back(std::string("comm.") + name + ".seconds", fmt(b.seconds));
    kv.emplace_back(std::string("comm.") + name + ".algbw_GBps", fmt(b.algbw_GBps));
    kv.emplace_back(std::string("comm.") + name + ".busbw_GBps", fmt(b.busbw_GBps));
  }
  // Across hosts: rank 0 and the first rank elsewhere swap n floats; the others wait in
  // the timing's barrier and maximum (a collective every rank calls, so none can hang).
  const int peer = first_remote_rank(hosts);
  if (peer > 0) {
    std::vector<float> in(n);
    const int me = comm.rank();
    const bool pair = me == 0 || me == peer;
    const int other = me == 0 ? peer : 0;
    double secs = median_seconds(comm, iters, [&] {
      if (pair) comm.sendrecv(buf.data(), n * sizeof(float), other, in.data(), n * sizeof(float), other);
    });
    kv.emplace_back("comm.internode.pair", "0@" + hosts[0] + "<->" + std::to_string(peer) + "@" + hosts[size_t(peer)]);
    kv.emplace_back("comm.internode.seconds", fmt(secs));
    kv.emplace_back("comm.internode.GBps", fmt(secs > 0 ? double(n * sizeof(float)) / secs / 1e9 : 0.0));
  }
  return kv;
}

}  // namespace sweep
