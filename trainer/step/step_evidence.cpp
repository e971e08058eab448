// One step's evidence for `sweep diagnose` (step_evidence.h).
#include "step_evidence.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "checksum.h"  // tensor_checksum
#include "hex.h"       // hex16, double_bits

namespace sweep {
std::vector<uint64_t> gather_share_digests(Communicator& comm, const std::vector<uint64_t>& mine, int64_t rotate,
                                           std::vector<int>* share_ranks) {
  const int w = comm.size();
  const size_t a = mine.size();
  std::vector<uint64_t> by_rank(a * size_t(w)), out(a * size_t(w));
  comm.allgather(mine.data(), a * sizeof(uint64_t), by_rank.data());
  share_ranks->assign(out.size(), 0);
  for (int r = 0; r < w; ++r) {
    const size_t d = size_t((r + rotate) % w);  // whose shares rank r computed
    for (size_t k = 0; k < a; ++k) out[d * a + k] = by_rank[size_t(r) * a + k], (*share_ranks)[d * a + k] = r;
  }
  return out;
}

std::vector<uint64_t> reduced_digests(const float* g, const std::vector<ParamInfo>& table) {
  std::vector<uint64_t> out;
  out.reserve(table.size());
  for (const auto& p : table) out.push_back(tensor_checksum(g + p.offset, size_t(p.numel)));
  return out;
}

void write_step_evidence(const std::string& path, const StepEvidence& e, const std::vector<ParamInfo>& table) {
  const std::string tmp = path + ".partial";
  {
    std::ofstream out(tmp, std::ios::binary);
    out << kStepEvidenceMagic << "\n";
    out << "step " << e.step << "\nworld_size " << e.world << "\naccum " << e.accum << "\nrotate " << e.rotate << "\n";
    out << "loss " << double_bits(e.loss) << "\ngrad_norm " << double_bits(e.grad_norm) << "\nparams "
        << hex16(e.params) << "\n";
    for (size_t j = 0; j < e.shares.size(); ++j) {
      out << "share " << j << " rank " << e.share_ranks[j] << " digest " << hex16(e.shares[j]) << " loss ";
      const std::vector<double>& ls = e.share_losses[j];
      for (size_t i = 0; i < ls.size(); ++i) out << (i ? "," : "") << double_bits(ls[i]);
      out << " samples ";
      const std::vector<int64_t>& ids = e.share_samples[j];
      for (size_t i = 0; i < ids.size(); ++i) out << (i ? "," : "") << ids[i];
      out << "\n";
    }
    for (size_t t = 0; t < e.reduced.size() && t < table.size(); ++t)
      out << "tensor " << hex16(e.reduced[t]) << " " << table[t].name << "\n";
    if (!e.nonfinite.empty()) out << "nonfinite " << e.nonfinite << "\n";
    if (!out.flush()) throw std::runtime_error(tmp + ": cannot write the step's evidence (dist.diagnose_step)");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw std::runtime_error(path + ": cannot rename the step's evidence into place: " + ec.message());
}

}  // namespace sweep
